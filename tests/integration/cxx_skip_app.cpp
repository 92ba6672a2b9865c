// SPDX-License-Identifier: MIT
// cxx_skip_app.cpp - a C++ database wrapper for t_cli_conveniences.sh: shop::Db::query
// (20 executions from app::run) and a template, long shop::Db::get<long>, whose
// demangled name starts with its return type (1 execution through query).
#include <sqlite3.h>
#include <string>
namespace shop {
struct Db {
	sqlite3 *db;
	__attribute__((noinline)) int query(const char *sql)
	{
		sqlite3_stmt *st;
		int n = 0;
		sqlite3_prepare_v2(db, sql, -1, &st, nullptr);
		while (sqlite3_step(st) == SQLITE_ROW)
			n++;
		sqlite3_finalize(st);
		return n;
	}
	template <class T> __attribute__((noinline)) T get(const char *sql)
	{
		return (T)query(sql);
	}
};
}
namespace app {
__attribute__((noinline)) int run(shop::Db &d)
{
	int n = 0;
	for (int i = 0; i < 20; i++)
		n += d.query("SELECT 1");
	n += (int)d.get<long>("SELECT 2");
	return n;
}
}
int main()
{
	shop::Db d;
	sqlite3_open(":memory:", &d.db);
	int n = app::run(d);
	sqlite3_close(d.db);
	return n == 21 ? 0 : 1;
}
