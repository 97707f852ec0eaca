#!/bin/sh
# root=live:... is this module's: the live root service mounts it.
[ -z "$root" ] && root=$(getarg root=)
case "$root" in live:*) rootok=1 ;; esac
