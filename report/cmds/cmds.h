/* SPDX-License-Identifier: MIT */
/* cmds.h - the subcommands of sqlprof, one file each (report/cmds/cmd-*.c). */
#ifndef SP_CMDS_H
#define SP_CMDS_H

int cmd_record(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_agent(int argc, char **argv);
int cmd_env(int argc, char **argv);
int cmd_top(int argc, char **argv);

#endif
