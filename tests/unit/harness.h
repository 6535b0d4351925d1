/*
 * harness — a minimal unit-test runner. Each test is a function named for
 * the behaviour it specifies:
 *
 *   TEST(a_flipped_byte_is_refused) { ... CHECK(rc == -EIO); ... }
 *   int main(void) { return harness_run(); }
 *
 * CHECK records a failure with file and line and returns from the test.
 * harness_temp_directory() gives each test a fresh directory under $TMPDIR,
 * removed after the test passes.
 */
#ifndef GRAPHFS_TEST_HARNESS_H
#define GRAPHFS_TEST_HARNESS_H

#include <stdio.h>

typedef void (*harness_test_fn)(void);
void harness_register(const char *name, harness_test_fn fn);
int harness_run(void);
void harness_fail(const char *file, int line, const char *expression);
int harness_failed(void);
/* A fresh, empty directory for this test (mkdtemp); removed recursively after a pass. */
const char *harness_temp_directory(void);

/* Built with AddressSanitizer (gcc or clang)? */
#if defined(__SANITIZE_ADDRESS__)
#define HARNESS_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HARNESS_SANITIZED 1
#endif
#endif
#ifndef HARNESS_SANITIZED
#define HARNESS_SANITIZED 0
#endif

/*
 * The rounds a loop of n rounds runs: n, or a quarter of them (at least one) in a
 * sanitized build, where every allocation and access costs several times as much
 * (docs/TESTING.md "Tiers"). For loops that repeat one behaviour with other data:
 * the normal build runs them whole.
 */
static inline int harness_rounds(int n)
{
	return HARNESS_SANITIZED ? (n / 4 > 0 ? n / 4 : 1) : n;
}

#define TEST(name)                                                           \
	static void test_##name(void);                                       \
	__attribute__((constructor)) static void register_##name(void)       \
	{                                                                    \
		harness_register(#name, test_##name);                        \
	}                                                                    \
	static void test_##name(void)

#define CHECK(expression)                                                    \
	do {                                                                 \
		if (!(expression)) {                                         \
			harness_fail(__FILE__, __LINE__, #expression);       \
			return;                                              \
		}                                                            \
	} while (0)

/* CHECK with the two integers printed on failure. */
#define CHECK_EQ(a, b)                                                              \
	do {                                                                        \
		long long check_a_ = (long long)(a), check_b_ = (long long)(b);     \
		if (check_a_ != check_b_) {                                         \
			char check_text_[512];                                      \
			snprintf(check_text_, sizeof check_text_, "%s == %s (%lld != %lld)", \
				 #a, #b, check_a_, check_b_);                       \
			harness_fail(__FILE__, __LINE__, check_text_);              \
			return;                                                     \
		}                                                                   \
	} while (0)

#endif
