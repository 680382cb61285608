/*
 * replay: main() for the fuzz targets outside libFuzzer. Every argument is
 * a file or a directory of files; each file is one input. Exit 0 when every
 * input ran (a finding aborts); 1 when an argument cannot be read, or when
 * there were no inputs at all.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int
run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;

    if (!f) {
        perror(path);
        return -1;
    }
    for (;;) {
        if (len == cap) {
            cap = cap ? cap * 2 : 4096;
            uint8_t *p = realloc(buf, cap);
            if (!p) {
                fclose(f);
                free(buf);
                return -1;
            }
            buf = p;
        }
        size_t n = fread(buf + len, 1, cap - len, f);
        if (n == 0)
            break;
        len += n;
    }
    fclose(f);
    /* Exactly len bytes, as libFuzzer hands them: a copy of that size. */
    uint8_t *exact = malloc(len ? len : 1);
    if (!exact) {
        free(buf);
        return -1;
    }
    memcpy(exact, buf, len);
    free(buf);
    LLVMFuzzerTestOneInput(exact, len);
    free(exact);
    return 0;
}

int
main(int argc, char **argv)
{
    int inputs = 0, bad = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            perror(argv[i]);
            bad = 1;
            continue;
        }
        if (!S_ISDIR(st.st_mode)) {
            bad |= run_file(argv[i]) < 0;
            inputs++;
            continue;
        }
        struct dirent **names;
        int n = scandir(argv[i], &names, NULL, alphasort);
        if (n < 0) {
            perror(argv[i]);
            bad = 1;
            continue;
        }
        for (int k = 0; k < n; k++) {
            char path[4096];
            if (names[k]->d_name[0] != '.') {
                snprintf(path, sizeof(path), "%s/%s", argv[i], names[k]->d_name);
                if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
                    bad |= run_file(path) < 0;
                    inputs++;
                }
            }
            free(names[k]);
        }
        free(names);
    }
    printf("replayed %d inputs\n", inputs);
    return bad || inputs == 0;
}
