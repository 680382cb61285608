#include "env.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

struct ce_env ce;

void
ce_setup(void)
{
    tu_dir_setup();
    tu_daemon_init(&ce.d, tu_dir, "test");
    snprintf(ce.trace, sizeof(ce.trace), "%s/trace.log", tu_dir);
}

void
ce_teardown(void)
{
    tu_daemon_cleanup(&ce.d);
    tu_dir_teardown();
}

struct tu_proc *
ce_start(const char *text, char *const args[])
{
    static const char *const dirs[] = {"tests/modules", NULL};
    char *env[] = {(char *)tu_module_path_env(dirs), NULL};
    tu_daemon_spawn(&ce.d, text, args, env);
    return &ce.d.proc;
}

void
ce_wait_trace(const char *line, int timeout_ms)
{
    char buf[256];
    if (tu_wait_line(ce.trace, line, buf, sizeof(buf), timeout_ms) != 0) {
        char *t = tu_read_file(ce.trace, NULL);
        tu_daemon_fail(&ce.d, "no \"%s\" in the trace:\n%s", line, t ? t : "");
    }
}

void
ce_wait_log(const char *needle, int timeout_ms)
{
    if (tu_daemon_wait_log(&ce.d, needle, timeout_ms) != 0)
        tu_daemon_fail(&ce.d, "no \"%s\" in the log", needle);
}

int
ce_exit_code(const struct tu_proc *p)
{
    ck_assert(p->reaped);
    ck_assert_msg(WIFEXITED(p->status), "daemon died of signal %d", WTERMSIG(p->status));
    return WEXITSTATUS(p->status);
}
