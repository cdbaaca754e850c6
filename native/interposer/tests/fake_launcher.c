/* fake-launcher: the shape of python.org's and Homebrew's framework Python
 * launcher (bin/python3.x, CPython's Mac/Tools/pythonw.c): a small program
 * that uses no Metal and execs the real interpreter,
 * ../Resources/Python.app/Contents/MacOS/Python next to its own bin/, with
 * the environment it was given.  A library that drops itself from the
 * injection variable in this process never reaches the interpreter. */
#define _GNU_SOURCE
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    char self[PATH_MAX], real[PATH_MAX + 64];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);

    (void)argc;
    if (n <= 0)
        return 127;
    self[n] = '\0';
    snprintf(real, sizeof real, "%s/../Resources/Python.app/Contents/MacOS/Python", dirname(self));
    argv[0] = real;   /* as pythonw.c does: the interpreter runs as itself */
    execv(real, argv);
    fprintf(stderr, "fake-launcher: cannot exec %s\n", real);
    return 127;
}
