#include "harness.h"

int main(void)
{
	return harness_run();
}
