/* Module loading (issue 10, finding 9): a module with the right ABI number
 * but a short table, an empty required slot, half the timer slots or no
 * entry point is refused with a reason that names the file and the fault,
 * instead of crashing the caller; a broken file in FATTN_MODULE_DIR is not
 * silently replaced by another copy; a FATTN_MODULE_DIR that is relative or
 * missing is named. The registry loads a module once per process, so each
 * case runs in a child process. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "fattn.h"

typedef struct module_case {
    const char
        *dir; /* FATTN_MODULE_DIR: a folder under FATTN_FAKE_ROOT, or absolute/relative as is */
    int available;          /* what fattn_backend_get_info must say */
    const char *needles[2]; /* what its reason must contain ("" = nothing more) */
} module_case;

/* In a child: sets the variable, asks for the backend, checks the answer.
 * Exit status 0 on success, 1 on a wrong answer; a crash is a signal. */
static int child(const module_case *c) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s%s%s", c->dir[0] == '/' || c->dir[0] == '.' ? "" : FATTN_FAKE_ROOT,
             c->dir[0] == '/' || c->dir[0] == '.' ? "" : "/", c->dir);
    setenv("FATTN_MODULE_DIR", dir, 1);
    fattn_backend_info info = FATTN_BACKEND_INFO_INIT;
    if (fattn_backend_get_info(FATTN_BACKEND_OPENCL, &info) != FATTN_OK) return 1;
    int ok = info.available == c->available;
    for (int i = 0; i < 2; i++)
        if (c->needles[i][0] && !strstr(info.reason, c->needles[i])) ok = 0;
    if (c->available && ok) { /* the fake's own device, so the fake was loaded */
        char name[128];
        ok = fattn_device_get_name(FATTN_BACKEND_OPENCL, 0, name, sizeof name) == FATTN_OK &&
             strcmp(name, "fake module device") == 0;
    }
    if (!ok)
        fprintf(stderr, "FATTN_MODULE_DIR=%s: available %d, reason \"%s\"\n", dir, info.available,
                info.reason);
    return ok ? 0 : 1;
}

static void run_case(const module_case *c) {
    fflush(NULL);
    const pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) _exit(child(c));
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (WIFSIGNALED(status))
        fail_msg("FATTN_MODULE_DIR=%s: the process died of signal %d", c->dir, WTERMSIG(status));
    if (WEXITSTATUS(status) != 0) fail_msg("FATTN_MODULE_DIR=%s: wrong answer (see above)", c->dir);
}

static void test_good_module_is_used(void **state) {
    (void)state;
    const module_case c = {"good", 1, {"", ""}};
    run_case(&c);
}

static void test_refused_modules_name_file_and_fault(void **state) {
    (void)state;
    const module_case cases[] = {
        {"abi", 0, {FATTN_FAKE_ROOT "/abi/libfattn-opencl.so", "backend ABI"}},
        {"short", 0, {FATTN_FAKE_ROOT "/short/libfattn-opencl.so", "table is"}},
        {"slot", 0, {FATTN_FAKE_ROOT "/slot/libfattn-opencl.so", "'plan'"}},
        {"norun", 0, {FATTN_FAKE_ROOT "/norun/libfattn-opencl.so", "'run'"}},
        {"marks", 0, {FATTN_FAKE_ROOT "/marks/libfattn-opencl.so", "mark_elapsed"}},
        {"nosym", 0, {FATTN_FAKE_ROOT "/nosym/libfattn-opencl.so", "no symbol"}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i]);
}

/* The real module sits beside this test: a broken copy in FATTN_MODULE_DIR
 * must win over it, with its reason, rather than be skipped silently. */
static void test_broken_file_in_module_dir_is_not_skipped(void **state) {
    (void)state;
    const module_case c = {
        "garbage", 0, {FATTN_FAKE_ROOT "/garbage/libfattn-opencl.so", "cannot load"}};
    run_case(&c);
}

static void test_bad_module_dir_named(void **state) {
    (void)state;
    const module_case cases[] = {
        {"./relative/modules", 0, {"FATTN_MODULE_DIR='./relative/modules'", "absolute path"}},
        {"/nonexistent-fattn-modules",
         0,
         {"FATTN_MODULE_DIR='/nonexistent-fattn-modules'", "existing directory"}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_module_is_used),
        cmocka_unit_test(test_refused_modules_name_file_and_fault),
        cmocka_unit_test(test_broken_file_in_module_dir_is_not_skipped),
        cmocka_unit_test(test_bad_module_dir_named),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
