/* test-log.c -- level parsing and filtering of log.c. */
#include "base/log.h"
#include "tap.h"

int main(void)
{
	tap_is_int(log_level_parse("error"), LOG_ERROR, "error parses");
	tap_is_int(log_level_parse("WARN"), LOG_WARN, "level names are case-insensitive");
	tap_is_int(log_level_parse("debug"), LOG_DEBUG, "debug parses");
	tap_is_int(log_level_parse("verbose"), -1, "unknown level is refused");
	log_set_level(LOG_WARN);
	tap_is_int(log_get_level(), LOG_WARN, "level is kept");
	return tap_done();
}
