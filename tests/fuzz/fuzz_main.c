/*
 * A plain regression runner for the fuzz targets when libFuzzer is not
 * linked (any compiler without -fsanitize=fuzzer): feeds each file named on
 * the command line, or each file inside a named directory, to
 * LLVMFuzzerTestOneInput once. Exit status 0 unless a file cannot be read
 * (a finding aborts inside the target).
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
	FILE *file = fopen(path, "rb");
	if (!file) {
		perror(path);
		return 1;
	}
	size_t capacity = 1 << 16, size = 0, got;
	uint8_t *data = malloc(capacity);
	while (data && (got = fread(data + size, 1, capacity - size, file)) > 0) {
		size += got;
		if (size == capacity) {
			uint8_t *bigger = realloc(data, capacity *= 2);
			if (!bigger)
				free(data);
			data = bigger;
		}
	}
	fclose(file);
	if (!data) {
		fprintf(stderr, "%s: out of memory\n", path);
		return 1;
	}
	LLVMFuzzerTestOneInput(data, size);
	free(data);
	return 0;
}

int main(int argc, char **argv)
{
	int failures = 0, files = 0;
	for (int i = 1; i < argc; i++) {
		struct stat status;
		if (stat(argv[i], &status) == 0 && S_ISDIR(status.st_mode)) {
			DIR *directory = opendir(argv[i]);
			struct dirent *entry;
			while (directory && (entry = readdir(directory))) {
				char path[4096];
				if (entry->d_name[0] == '.')
					continue;
				snprintf(path, sizeof path, "%s/%s", argv[i], entry->d_name);
				failures += run_file(path);
				files++;
			}
			if (directory)
				closedir(directory);
		} else {
			failures += run_file(argv[i]);
			files++;
		}
	}
	fprintf(stderr, "%d inputs, %d unreadable\n", files, failures);
	return failures ? 1 : 0;
}
