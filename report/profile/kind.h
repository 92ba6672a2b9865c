/* SPDX-License-Identifier: MIT */
/*
 * kind.h - what kind of query a profile row is: a prepared statement or
 * one sqlite3_exec call. Profiles store it as text ("stmt", "exec": the
 * kind columns, docs/profile-format.md); readers parse it once, where a
 * row is read (sp_qkind_parse), carry enum sp_qkind everywhere after, and
 * print it once, where it goes out (sp_qkind_name). The values are the
 * wire's SP_KIND_STMT and SP_KIND_EXEC (sp_wire.h; profile.c checks).
 */
#ifndef SP_KIND_H
#define SP_KIND_H

#include <string.h>

enum sp_qkind {
	SP_QK_STMT = 0, /* "stmt": a prepared statement, first step to end */
	SP_QK_EXEC = 1, /* "exec": one sqlite3_exec call */
};

/* The kind column's text: "exec" is an exec; anything else, NULL (a
 * hostile or older profile) included, is a statement, as readers always
 * took it. */
static inline enum sp_qkind sp_qkind_parse(const void *text)
{
	return text && !strcmp((const char *)text, "exec") ? SP_QK_EXEC : SP_QK_STMT;
}

/* The text a profile and every output spell kind k with. */
static inline const char *sp_qkind_name(enum sp_qkind k)
{
	return k == SP_QK_EXEC ? "exec" : "stmt";
}

#endif
