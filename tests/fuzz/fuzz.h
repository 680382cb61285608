/*
 * fuzz.h: what every libFuzzer target under tests/fuzz shares.
 *
 * Each target is one file defining LLVMFuzzerTestOneInput. With
 * -Dfuzzers=true (clang) it links libFuzzer; every build also links it with
 * replay.c, whose main feeds each file of the directories it is given to
 * the target, so meson test replays the seed corpus and every regression
 * input under tests/fuzz/regress/ in the plain and sanitizer builds.
 * A finding aborts (FUZZ_ASSERT), so that libFuzzer keeps the input.
 */
#ifndef PRISMLB_FUZZ_H
#define PRISMLB_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_ASSERT(cond, ...)                                                                     \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz: %s:%d: ", __FILE__, __LINE__);                                  \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#endif
