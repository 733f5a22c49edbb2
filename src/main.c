/* main.c -- placeholder until the command line lands (issue 2). */
#include <stdio.h>
int main(void)
{
	fprintf(stderr, "ringproxy: not built yet\n");
	return 1;
}
