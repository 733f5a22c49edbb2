#!/bin/sh
# conf/install-config.sh DIR -- run by `meson install` after the example
# config went to DIR/ringproxy.ini.example: DIR/ringproxy.ini is made from
# it only where none exists, so an operator's file is never overwritten
# (DESTDIR, when set, is prepended to DIR as meson does for files).
set -eu
dir="${DESTDIR:-}$1"
if [ -e "$dir/ringproxy.ini" ] || [ -L "$dir/ringproxy.ini" ]; then
	echo "ringproxy: keeping $dir/ringproxy.ini (the new example is ringproxy.ini.example beside it)" >&2
	exit 0
fi
cp "$dir/ringproxy.ini.example" "$dir/ringproxy.ini"
echo "ringproxy: made $dir/ringproxy.ini from ringproxy.ini.example" >&2
