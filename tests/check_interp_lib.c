/* SPDX-License-Identifier: MIT */
/*
 * check_interp_lib.c - sp_frame_is_library for Ruby's and PHP's frames
 * (preload/iframes.c; module "ruby", "php"): installed code by its path's
 * structure, never by a folder's name alone.
 */
#include <check.h>
#include <stdlib.h>

#include "attrib.h"

static int lib(const char *module, const char *file)
{
	struct sp_frame f = { 0 };

	f.module = (char *)module;
	f.function = (char *)"f";
	f.file = (char *)file;
	f.py = 1;
	return sp_frame_is_library(&f);
}

START_TEST(test_ruby)
{
	ck_assert(lib("ruby", "<cfunc>"));
	ck_assert(lib("ruby", "<internal:kernel>"));
	ck_assert(lib("ruby", "/usr/lib/ruby/vendor_ruby/sqlite3/statement.rb"));
	ck_assert(lib("ruby", "/usr/lib/ruby/3.1.0/monitor.rb"));
	ck_assert(lib("ruby", "/usr/share/rubygems-integration/all/gems/activerecord-6.1.7.10/"
			      "lib/active_record/persistence.rb"));
	ck_assert(lib("ruby", "/home/u/.gem/ruby/3.1.0/gems/activerecord-7.1.3/lib/a.rb"));
	ck_assert(lib("ruby", "/srv/app/vendor/bundle/ruby/3.1.0/gems/rack-3.0.8/lib/rack.rb"));
	ck_assert(!lib("ruby", "/srv/app/app/models/post.rb"));
	ck_assert(!lib("ruby", "app.rb"));
	ck_assert(!lib("ruby", "-e"));
	ck_assert(!lib("ruby", "/home/u/gems/shop/lib/store.rb")); /* a folder named gems */
}
END_TEST

START_TEST(test_php)
{
	ck_assert(lib("php", "<internal>"));
	ck_assert(lib("php", "/usr/share/php/Symfony/Component/Yaml/Yaml.php"));
	ck_assert(lib("php", "/var/www/site/vendor/laravel/framework/src/Database/Connection.php"));
	ck_assert(lib("php", "/var/www/site/vendor/autoload.php"));
	ck_assert(lib("php", "/var/www/site/vendor/composer/ClassLoader.php"));
	ck_assert(!lib("php", "/var/www/site/app/Http/Controllers/PostController.php"));
	ck_assert(!lib("php", "/var/www/site/vendor/helpers.php")); /* not a package */
	ck_assert(!lib("php", "/home/u/vendor/site/index.php"));    /* a folder named vendor */
	ck_assert(!lib("php", "Command line code"));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("interp_lib");
	TCase *tc = tcase_create("rules");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_ruby);
	tcase_add_test(tc, test_php);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
