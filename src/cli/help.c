/*
 * help.c - renders a front end's table (help.h) as getopt_long() arrays, plain-text help, a
 * man page and a bash completion script. Only the table says what the options are; this
 * file only lays them out, the same way for both binaries.
 */
#include "cli/help.h"

#include "core/settings.h"

#include <string.h>

#include <cohort/handler.h>
#include <mongoc/mongoc.h>

#include "core/version.h"

#define WIDTH 80        /* plain-text help wraps here */
#define OPTION_COLUMN 26 /* where an option's text starts */

/* ---- getopt ------------------------------------------------------------------------------ */

void cli_longopts(const cli_option_t *options, struct option out[CLI_MAX_OPTIONS + 1])
{
    size_t n = 0;
    for (const cli_option_t *o = options; o && o->name && n < CLI_MAX_OPTIONS; o++)
        out[n++] = (struct option){o->name, o->arg ? required_argument : no_argument, NULL,
                                   o->val};
    out[n] = (struct option){NULL, 0, NULL, 0};
}

void cli_shortopts(const cli_option_t *options, const char *prefix, char *out, size_t len)
{
    size_t used = (size_t)snprintf(out, len, "%s", prefix);
    for (const cli_option_t *o = options; o && o->name && used + 3 < len; o++) {
        if (!(o->flags & CLI_SHORT))
            continue;
        out[used++] = (char)o->val;
        if (o->arg)
            out[used++] = ':';
        out[used] = '\0';
    }
}

const cli_command_t *cli_find_command(const cli_program_t *program, const char *name)
{
    for (const cli_command_t *c = program->commands; c && c->name; c++)
        if (strcmp(c->name, name) == 0)
            return c;
    return NULL;
}

void cli_print_version(FILE *out, const cli_program_t *program)
{
    fprintf(out,
            "%s %s\ndatabase schema version %d (serves %d..%d)\nhandler ABI %d..%d\n"
            "libmongoc %s\n",
            program->name, COHORT_VERSION, COHORT_SCHEMA_VERSION, COHORT_SCHEMA_VERSION_OLDEST,
            COHORT_SCHEMA_VERSION, 1, COHORT_HANDLER_ABI_VERSION, mongoc_get_version());
}

/* ---- plain text -------------------------------------------------------------------------- */

/* Prints `text` from column `col` (where the cursor is), wrapping at WIDTH to `indent`; a
 * "\n" in the text starts a new line, "\n\n" a new paragraph. Ends with a newline. */
static void print_wrapped(FILE *out, const char *text, int indent, int col)
{
    const char *p = text;
    while (*p) {
        if (*p == '\n') {
            fputc('\n', out);
            p++;
            col = 0;
            continue;
        }
        if (*p == ' ') {
            p++;
            continue;
        }
        int len = (int)strcspn(p, " \n");
        if (col > indent && col + 1 + len > WIDTH) {
            fputc('\n', out);
            col = 0;
        }
        if (col < indent) {
            fprintf(out, "%*s", indent - col, "");
            col = indent;
        } else if (col > indent) {
            fputc(' ', out);
            col++;
        }
        fprintf(out, "%.*s", len, p);
        col += len;
        p += len;
    }
    fputc('\n', out);
}

/* "-c, --config FILE" */
static int option_label(const cli_option_t *o, char *buf, size_t len)
{
    char letter[8] = "";
    if (o->flags & CLI_SHORT)
        snprintf(letter, sizeof letter, "-%c, ", o->val);
    return snprintf(buf, len, "%s--%s%s%s", letter, o->name, o->arg ? " " : "",
                    o->arg ? o->arg : "");
}

static void print_options(FILE *out, const cli_option_t *options, int indent)
{
    for (const cli_option_t *o = options; o && o->name; o++) {
        char label[128];
        int len = option_label(o, label, sizeof label);
        fprintf(out, "%*s%s", indent, "", label);
        int col = indent + len;
        if (col + 2 > OPTION_COLUMN) {
            fputc('\n', out);
            col = 0;
        }
        print_wrapped(out, o->text, OPTION_COLUMN, col);
    }
}

void cli_print_usage(FILE *out, const cli_program_t *program)
{
    const char *line = program->synopsis;
    const char *lead = "Usage: ";
    while (*line) {
        int len = (int)strcspn(line, "\n");
        fprintf(out, "%s%s %.*s\n", lead, program->name, len, line);
        lead = "       ";
        line += len + (line[len] == '\n');
    }
}

static void print_sections(FILE *out, const cli_program_t *program)
{
    for (const cli_section_t *s = program->sections; s && s->title; s++) {
        fprintf(out, "\n%c", s->title[0]);
        for (const char *t = s->title + 1; *t; t++)
            fputc(*t >= 'A' && *t <= 'Z' ? *t - 'A' + 'a' : *t, out);
        fputs(":\n", out);
        print_wrapped(out, s->text, 2, 0);
    }
}

void cli_print_help(FILE *out, const cli_program_t *program)
{
    cli_print_usage(out, program);
    fputc('\n', out);
    print_wrapped(out, program->description, 0, 0);
    fputs("\nOptions:\n", out);
    print_options(out, program->options, 2);
    if (program->commands)
        fputs("\nCommands (each also takes --help):\n", out);
    for (const cli_command_t *c = program->commands; c && c->name; c++) {
        fprintf(out, "  %s %s\n", c->name, c->synopsis);
        print_wrapped(out, c->summary, 6, 0);
        print_options(out, c->options, 6);
    }
    print_sections(out, program);
}

void cli_print_command_help(FILE *out, const cli_program_t *program,
                            const cli_command_t *command)
{
    fprintf(out, "Usage: %s [GLOBAL OPTIONS] %s %s\n\n", program->name, command->name,
            command->synopsis);
    print_wrapped(out, command->summary, 0, 0);
    if (command->details) {
        fputc('\n', out);
        print_wrapped(out, command->details, 0, 0);
    }
    fputs("\nOptions:\n", out);
    print_options(out, command->options, 2);
    fprintf(out, "  --help                  this help\n\nGlobal options: `%s --help`.\n",
            program->name);
}

/* ---- man page ---------------------------------------------------------------------------- */

/* Prints the character at `p`, a UTF-8 sequence as roff's \[uXXXX] (groff reads bytes as
 * Latin-1 otherwise); returns how many bytes after the first it took. */
static int man_char(FILE *out, const char *p)
{
    unsigned char c = (unsigned char)*p;
    int more = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : c >= 0xC0 ? 1 : 0;
    if (more == 0) {
        fputc(*p, out);
        return 0;
    }
    unsigned long code = c & (0x3F >> more);
    for (int i = 1; i <= more; i++) {
        if (((unsigned char)p[i] & 0xC0) != 0x80) { /* not UTF-8 after all: drop the byte */
            fputc('?', out);
            return 0;
        }
        code = (code << 6) | ((unsigned char)p[i] & 0x3F);
    }
    fprintf(out, "\\[u%04lX]", code);
    return more;
}

/* `text` escaped for roff, without a final newline. */
static void man_escape(FILE *out, const char *text)
{
    bool bold = false, line_start = true;
    for (const char *p = text; *p; p++) {
        if (line_start && (*p == '.' || *p == '\''))
            fputs("\\&", out);
        line_start = false;
        switch (*p) {
        case '\\':
            fputs("\\e", out);
            break;
        case '-':
            fputs("\\-", out);
            break;
        case '`':
            fputs(bold ? "\\fR" : "\\fB", out);
            bold = !bold;
            break;
        case '\n':
            /* a paragraph break, or a line break within one */
            fputs(p[1] == '\n' ? "\n.sp\n" : "\n.br\n", out);
            p += p[1] == '\n';
            line_start = true;
            break;
        default:
            p += man_char(out, p);
        }
    }
    if (bold)
        fputs("\\fR", out);
}

void cli_man_text(FILE *out, const char *text)
{
    man_escape(out, text);
    fputc('\n', out);
}

/* .TP entries: "-c, --config FILE" in bold and italics, then the text. */
static void man_options(FILE *out, const cli_option_t *options)
{
    for (const cli_option_t *o = options; o && o->name; o++) {
        fputs(".TP\n", out);
        if (o->flags & CLI_SHORT)
            fprintf(out, "\\fB\\-%c\\fR, ", o->val);
        fputs("\\fB\\-\\-", out);
        man_escape(out, o->name);
        fputs("\\fR", out);
        if (o->arg) {
            fputs(" \\fI", out);
            man_escape(out, o->arg);
            fputs("\\fR", out);
        }
        fputc('\n', out);
        cli_man_text(out, o->text);
    }
}

void cli_print_man(FILE *out, const cli_program_t *program)
{
    char upper[64];
    size_t n = 0;
    for (; program->name[n] && n + 1 < sizeof upper; n++)
        upper[n] = (char)(program->name[n] >= 'a' && program->name[n] <= 'z'
                              ? program->name[n] - 'a' + 'A'
                              : program->name[n]);
    upper[n] = '\0';
    fprintf(out,
            ".\\\" Generated by `%s --print-man` from its command-line table; do not edit.\n"
            ".TH %s 1 \"\" \"Cohort %s\" \"User Commands\"\n.SH NAME\n%s \\- ",
            program->name, upper, COHORT_VERSION, program->name);
    cli_man_text(out, program->summary);
    fputs(".SH SYNOPSIS\n", out);
    for (const char *line = program->synopsis; *line;) {
        int len = (int)strcspn(line, "\n");
        char one[512];
        snprintf(one, sizeof one, "%.*s", len, line);
        fprintf(out, ".br\n\\fB%s\\fR ", program->name);
        cli_man_text(out, one);
        line += len + (line[len] == '\n');
    }
    fputs(".SH DESCRIPTION\n", out);
    cli_man_text(out, program->description);
    fputs(".SH OPTIONS\n", out);
    man_options(out, program->options);
    if (program->commands)
        fputs(".SH COMMANDS\nEach command also takes \\fB\\-\\-help\\fR.\n", out);
    for (const cli_command_t *c = program->commands; c && c->name; c++) {
        fprintf(out, ".SS %s ", c->name);
        cli_man_text(out, c->synopsis);
        cli_man_text(out, c->summary);
        if (c->details) {
            fputs(".PP\n", out);
            cli_man_text(out, c->details);
        }
        if (c->options) {
            fputs(".RS\n", out);
            man_options(out, c->options);
            fputs(".RE\n", out);
        }
    }
    if (program->man_extra)
        program->man_extra(out);
    for (const cli_section_t *s = program->sections; s && s->title; s++) {
        fprintf(out, ".SH %s\n", s->title);
        cli_man_text(out, s->text);
    }
}

/* ---- bash completion --------------------------------------------------------------------- */

/* The words of `options` as typed: "--json --by" (and -c forms), after `lead`. */
static void completion_words(FILE *out, const cli_option_t *options, bool with_help)
{
    const char *sep = "";
    for (const cli_option_t *o = options; o && o->name; o++) {
        fprintf(out, "%s--%s", sep, o->name);
        sep = " ";
        if (o->flags & CLI_SHORT)
            fprintf(out, " -%c", o->val);
    }
    if (with_help)
        fprintf(out, "%s--help", sep);
}

/* case arms completing the value after each option of `options` that takes one. */
static void completion_values(FILE *out, const cli_option_t *options, const char *indent)
{
    for (const cli_option_t *o = options; o && o->name; o++) {
        if (!o->arg)
            continue;
        fprintf(out, "%s--%s", indent, o->name);
        if (o->flags & CLI_SHORT)
            fprintf(out, "|-%c", o->val);
        if (o->values)
            fprintf(out, ") COMPREPLY=($(compgen -W '%s' -- \"$cur\")); return ;;\n", o->values);
        else if (strcmp(o->arg, "FILE") == 0)
            fputs(") COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n", out);
        else
            fputs(") return ;;\n", out);
    }
}

/* One operand position's words (see help.h's `operands`) as the bash text that expands to
 * them: words as they are, SERVICE as $(_cohort_services), COMMAND as $commands, SETTING
 * as the live settings' keys. */
static void completion_position(FILE *out, const char *spec, int len)
{
    const char *sep = "";
    for (const char *p = spec, *end = spec + len; p < end;) {
        int n = (int)strcspn(p, "| ");
        if (n > end - p)
            n = (int)(end - p);
        fputs(sep, out);
        sep = " ";
        if (n == 7 && strncmp(p, "SERVICE", 7) == 0) {
            fputs("$(_cohort_services)", out);
        } else if (n == 7 && strncmp(p, "COMMAND", 7) == 0) {
            fputs("$commands", out);
        } else if (n == 7 && strncmp(p, "SETTING", 7) == 0) {
            char names[512];
            cohort_settings_list_live_names(names, sizeof names);
            for (const char *c = names; *c; c++)
                if (*c != ',')
                    fputc(*c, out);
        } else {
            fprintf(out, "%.*s", n, p);
        }
        p += n + (p + n < end);
    }
}

/* `words=(...)`: what a command's operands complete to, by position: its row of the
 * program's `operands`, or its synopsis's first word (SERVICE, [COMMAND] or a|b|c), see
 * help.h. */
static void completion_operands(FILE *out, const cli_program_t *program, const cli_command_t *c)
{
    const char *spec = NULL;
    for (const cli_operands_t *o = program->operands; o && o->command; o++)
        if (strcmp(o->command, c->name) == 0)
            spec = o->spec;
    char derived[128] = "";
    if (!spec) {
        const char *s = c->synopsis;
        int len = (int)strcspn(s, " ");
        if (len == 7 && strncmp(s, "SERVICE", 7) == 0)
            snprintf(derived, sizeof derived, "SERVICE");
        else if (strncmp(s, "[COMMAND]", 9) == 0)
            snprintf(derived, sizeof derived, "COMMAND");
        else if (memchr(s, '|', (size_t)len) && s[0] >= 'a' && s[0] <= 'z')
            snprintf(derived, sizeof derived, "%.*s", len, s);
        spec = derived;
    }
    fputs("        words=(", out);
    for (const char *p = spec; *p;) {
        int len = (int)strcspn(p, " ");
        fputs(p == spec ? "\"" : " \"", out);
        completion_position(out, p, len);
        fputc('"', out);
        p += len + (p[len] == ' ');
    }
    fputs(")\n", out);
}

void cli_print_bash_completion(FILE *out, const cli_program_t *program)
{
    const char *name = program->name;
    fprintf(out,
            "# bash completion for %s. Generated by `%s --print-completion` from its\n"
            "# command-line table; do not edit. Install as completions/%s, or `source` it.\n"
            "\n"
            "# The services of the configuration file given with -c/--config, if any.\n"
            "_%s_services()\n{\n"
            "    local i file=\n"
            "    for ((i = 1; i < ${#COMP_WORDS[@]} - 1; i++)); do\n"
            "        case ${COMP_WORDS[i]} in -c | --config) file=${COMP_WORDS[i + 1]} ;; esac\n"
            "    done\n"
            "    [[ -r $file ]] && sed -n 's/^[[:space:]]*\\[service:\\([^]]*\\)\\].*/\\1/p' "
            "\"$file\"\n"
            "}\n"
            "\n_%s()\n{\n"
            "    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]}\n"
            "    local commands='",
            name, name, name, "cohort", name);
    for (const cli_command_t *c = program->commands; c && c->name; c++)
        fprintf(out, "%s%s", c == program->commands ? "" : " ", c->name);
    fputs("'\n    case $prev in\n", out);
    completion_values(out, program->options, "    ");
    fputs("    esac\n"
          "    # The command: the first word that is neither an option nor an option's value.\n"
          "    local i cmd= at=0\n"
          "    for ((i = 1; i < COMP_CWORD; i++)); do\n"
          "        case ${COMP_WORDS[i]} in\n",
          out);
    /* options with values skip their value */
    fputs("        ", out);
    const char *sep = "";
    for (const cli_option_t *o = program->options; o && o->name; o++) {
        if (!o->arg)
            continue;
        fprintf(out, "%s--%s", sep, o->name);
        if (o->flags & CLI_SHORT)
            fprintf(out, " | -%c", o->val);
        sep = " | ";
    }
    fputs(") ((i++)) ;;\n"
          "        -*) ;;\n"
          "        *) cmd=${COMP_WORDS[i]} at=$i; break ;;\n"
          "        esac\n"
          "    done\n"
          "    if [[ -z $cmd ]]; then\n"
          "        if [[ $cur == -* || -z $commands ]]; then\n"
          "            COMPREPLY=($(compgen -W '",
          out);
    completion_words(out, program->options, false);
    fputs("' -- \"$cur\"))\n"
          "        else\n"
          "            COMPREPLY=($(compgen -W \"$commands\" -- \"$cur\"))\n"
          "        fi\n"
          "        return\n"
          "    fi\n"
          "    local options= valued= words=()\n"
          "    case $cmd in\n",
          out);
    for (const cli_command_t *c = program->commands; c && c->name; c++) {
        fprintf(out, "    %s)\n        case $prev in\n", c->name);
        completion_values(out, c->options, "        ");
        fputs("        esac\n        options='", out);
        completion_words(out, c->options, true);
        fputs("'\n        valued='", out);
        sep = "";
        for (const cli_option_t *o = c->options; o && o->name; o++) {
            if (o->arg) {
                fprintf(out, "%s--%s", sep, o->name);
                sep = " ";
            }
        }
        fputs("'\n", out);
        completion_operands(out, program, c);
        fputs("        ;;\n", out);
    }
    fputs("    esac\n"
          "    # Operands typed so far: words after the command, not options or their values.\n"
          "    local operands=0\n"
          "    for ((i = at + 1; i < COMP_CWORD; i++)); do\n"
          "        [[ ${COMP_WORDS[i]} == -* ||\n"
          "            \" $valued \" == *\" ${COMP_WORDS[i - 1]} \"* ]] || ((operands++))\n"
          "    done\n",
          out);
    fprintf(out,
            "    if [[ $cur == -* ]]; then\n"
            "        COMPREPLY=($(compgen -W \"$options\" -- \"$cur\"))\n"
            "    elif ((operands < ${#words[@]})); then\n"
            "        COMPREPLY=($(compgen -W \"${words[operands]}\" -- \"$cur\"))\n"
            "    fi\n"
            "}\n"
            "complete -F _%s %s\n",
            name, name);
}
