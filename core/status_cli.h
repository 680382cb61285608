/*
 * status_cli: the `prismlb status` subcommand (see status_cli.c).
 */
#ifndef PRISMLB_STATUS_CLI_H
#define PRISMLB_STATUS_CLI_H

/* Run `prismlb status` with argv[0] = "status": fetch URL/status (default
 * http://127.0.0.1:7446) and print it as kubectl-like tables, or the JSON
 * with -o json. Exit status: 0, 1 when the daemon cannot be read or its
 * answer is not a status document, 2 for a usage error. Blocks (bounded:
 * 3 s to connect, 10 s in all); never runs inside the daemon. */
int core_status_cli(int argc, char **argv);

/* Its synopsis, for the daemon's usage text too. */
#define CORE_STATUS_SYNOPSIS "prismlb status [--url http://127.0.0.1:7446] [-o json]"

#endif
