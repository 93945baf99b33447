// Which sanitizer this translation unit is built with, the same way under g++ and clang.
// g++ defines __SANITIZE_ADDRESS__ / __SANITIZE_THREAD__; clang 14 defines neither and answers
// __has_feature(address_sanitizer) / __has_feature(thread_sanitizer) instead. CI's ASan+UBSan
// build is clang (it also builds the libFuzzer targets), its TSan build g++: code that must
// behave differently under a sanitizer tests GRADEML_ADDRESS_SANITIZER or
// GRADEML_THREAD_SANITIZER (1 or 0), never the compiler's own macros.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define GRADEML_ADDRESS_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GRADEML_ADDRESS_SANITIZER 1
#endif
#endif
#ifndef GRADEML_ADDRESS_SANITIZER
#define GRADEML_ADDRESS_SANITIZER 0
#endif

#if defined(__SANITIZE_THREAD__)
#define GRADEML_THREAD_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define GRADEML_THREAD_SANITIZER 1
#endif
#endif
#ifndef GRADEML_THREAD_SANITIZER
#define GRADEML_THREAD_SANITIZER 0
#endif
