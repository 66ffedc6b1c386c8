/* The subcommands of uwarp-mpa. Each takes the arguments after its name
 * (argv[0] is the subcommand) and returns the process exit code. */
#ifndef UW_TOOLS_MPA_CMDS_H
#define UW_TOOLS_MPA_CMDS_H

int cmd_encode(int argc, char **argv);
int cmd_decode(int argc, char **argv);
int cmd_frame(int argc, char **argv);
int cmd_parse_frame(int argc, char **argv);
int cmd_demo(int argc, char **argv);

/* Prints the help of one subcommand (or of all when name is NULL) on stdout;
 * returns CLI_EXIT_OK, or CLI_EXIT_IO if stdout cannot be written. */
int mpa_help(const char *name);

#endif
