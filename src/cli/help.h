/*
 * help.h - the command lines of cohortd and cohortctl, described once per binary.
 *
 * Each front end has one table: its options and commands, each command with its synopsis,
 * one-line summary and options, each option with what it does. Everything a person reads
 * about a command line is rendered from that table - --help, `cohortctl help COMMAND`, the
 * man pages (--print-man, built into build/man/ and installed) and the bash completion
 * (--print-completion) - and the getopt_long() arrays are built from the same rows
 * (cli_longopts), so the parser cannot accept an option the help does not describe.
 * Adding a command or an option is adding a row.
 */
#ifndef COHORT_CLI_HELP_H
#define COHORT_CLI_HELP_H

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>

struct ctl; /* cohortctl's context (cli/ctl.h); cohortd has no commands */

#define CLI_MAX_OPTIONS 24 /* options of one command, or of a binary */

enum { CLI_LONG_ONLY = 0, CLI_SHORT = 1 }; /* cli_option_t.flags */

typedef struct cli_option {
    const char *name; /* the long option, without "--" */
    const char *arg;  /* its value's placeholder ("N"), or NULL: it takes no value */
    int val;          /* what getopt_long() returns for it */
    int flags;        /* CLI_SHORT: `val` is also its one-letter form (-c) */
    const char *text; /* what it does; the renderers wrap it */
    const char *values; /* for completion: the words its value may be, or NULL */
} cli_option_t;

typedef struct cli_command {
    const char *name;
    int (*run)(struct ctl *ctl, int argc, char **argv);
    /* What follows the name: "SERVICE [--json]". Completion reads its first word: SERVICE
     * (service names of the -c file), a|b|c (those words) or [COMMAND]. */
    const char *synopsis;
    const char *summary; /* one line */
    const char *details; /* more, or NULL */
    const cli_option_t *options; /* NULL-name-terminated, or NULL: it takes none */
} cli_command_t;

/* For completion: what a command's operands complete to, by position, space-separated;
 * within a position '|'-separated words, where SERVICE stands for the service names of the
 * -c file, SETTING for the live settings' keys and COMMAND for the commands. A command
 * without such a row completes its first operand from its synopsis's first word (above). */
typedef struct cli_operands {
    const char *command;
    const char *spec; /* "get|set|unset SERVICE SETTING" */
} cli_operands_t;

/* A section of the help and man page after the options and commands. */
typedef struct cli_section {
    const char *title; /* "EXIT STATUS" */
    const char *text;  /* paragraphs separated by "\n\n" */
} cli_section_t;

typedef struct cli_program {
    const char *name;
    const char *summary;  /* the man page's NAME line */
    const char *synopsis; /* usage lines after the name, one per "\n" */
    const char *description;
    const cli_option_t *options;    /* the global options, NULL-name-terminated */
    const cli_command_t *commands;  /* NULL-name-terminated, or NULL */
    const cli_section_t *sections;  /* NULL-title-terminated, or NULL */
    void (*man_extra)(FILE *out);   /* more man page sections (roff), or NULL */
    const cli_operands_t *operands; /* NULL-command-terminated, or NULL */
} cli_program_t;

/* Fills `out` with the getopt_long() array of `options` (NULL: none), terminated. */
void cli_longopts(const cli_option_t *options, struct option out[CLI_MAX_OPTIONS + 1]);

/* `prefix` ("+:") then the one-letter options of `options` ("c:d:h"), into `out`. */
void cli_shortopts(const cli_option_t *options, const char *prefix, char *out, size_t len);

/* The command named `name`, or NULL. */
const cli_command_t *cli_find_command(const cli_program_t *program, const char *name);

/* --version: the program's release, the database schema version it writes and the range it
 * serves, the handler ABI range it loads and libmongoc's version; one fact a line, the
 * release first ("cohortd 0.2.0"). */
void cli_print_version(FILE *out, const cli_program_t *program);

/* The usage lines alone (for stderr after a bad argument). */
void cli_print_usage(FILE *out, const cli_program_t *program);

/* Everything: usage, description, every option, every command with its options, sections. */
void cli_print_help(FILE *out, const cli_program_t *program);

/* One command: its usage line, summary, details and options. */
void cli_print_command_help(FILE *out, const cli_program_t *program,
                            const cli_command_t *command);

/* The man page (section 1, roff with the man macros). */
void cli_print_man(FILE *out, const cli_program_t *program);

/* Text for a man page: roff's special characters escaped, `code` set in bold. */
void cli_man_text(FILE *out, const char *text);

/* A bash completion script: `source` it, or install it as completions/NAME. */
void cli_print_bash_completion(FILE *out, const cli_program_t *program);

#endif
