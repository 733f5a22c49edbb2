/*
 * test-freelist.c -- freelist.h: structs come back last kept first, the
 * list holds at most its bound (the caller frees the rest), and the link
 * may sit anywhere in the struct.
 */
#include "base/freelist.h"
#include "tap.h"

struct test_obj {
	int id;
	char pad[40];
	struct freelist_link reuse;     /* not first: FREELIST_ENTRY's offset */
};

/* The id of the struct taken off fl, -1 when it is empty. */
static int test_pop_id(struct freelist *fl)
{
	struct freelist_link *l = freelist_pop(fl);

	return l ? FREELIST_ENTRY(l, struct test_obj, reuse)->id : -1;
}

int main(void)
{
	struct test_obj o[5];
	struct freelist fl;
	struct freelist_link *l;
	int kept = 0;

	for (int i = 0; i < 5; i++)
		o[i].id = i;
	freelist_init(&fl, 3);
	tap_ok(freelist_pop(&fl) == NULL, "an empty list gives nothing");
	for (int i = 0; i < 5; i++)
		kept += freelist_push(&fl, &o[i].reuse);
	tap_is_int(kept, 3, "a list bounded at 3 keeps 3 of 5");
	tap_is_int(fl.n, 3, "and counts them");
	l = freelist_pop(&fl);
	tap_ok(l && FREELIST_ENTRY(l, struct test_obj, reuse) == &o[2], "the last kept comes back first");
	tap_ok(l && l->next == NULL, "a struct taken off is unlinked");
	tap_ok(freelist_push(&fl, &o[4].reuse), "a taken slot can be filled again");
	tap_is_int(test_pop_id(&fl), 4, "LIFO: 4");
	tap_is_int(test_pop_id(&fl), 1, "LIFO: 1");
	tap_is_int(test_pop_id(&fl), 0, "LIFO: 0");
	tap_ok(freelist_pop(&fl) == NULL && fl.n == 0, "then empty");
	freelist_init(&fl, 0);
	tap_ok(!freelist_push(&fl, &o[0].reuse), "a list bounded at 0 keeps nothing");
	return tap_done();
}
