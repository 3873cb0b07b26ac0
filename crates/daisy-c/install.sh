#!/bin/sh
# Install Daisy's C library into a prefix: PREFIX/lib/libdaisy.so, PREFIX/lib/libdaisy.a,
# PREFIX/include/daisy.h and PREFIX/lib/pkgconfig/daisy.pc.
#
#   crates/daisy-c/install.sh [--prefix DIR] [--lib-dir DIR]
#
# --prefix   where to install (default /usr/local; $DESTDIR is prepended when set)
# --lib-dir  install libdaisy.so/.a from DIR instead of building them
#            (default: cargo build --release --locked -p daisy-c, then target/release)
# Then: cc prog.c $(pkg-config --cflags --libs daisy)   (PKG_CONFIG_PATH=PREFIX/lib/pkgconfig
# when PREFIX is not a system prefix; add -Wl,-rpath,PREFIX/lib or set LD_LIBRARY_PATH to run).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
prefix=/usr/local
libdir=""
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) prefix=$2; shift 2 ;;
        --lib-dir) libdir=$2; shift 2 ;;
        -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
        *) echo "install.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
if [ -z "$libdir" ]; then
    (cd "$root" && cargo build --release --locked -p daisy-c)
    libdir=$root/target/release
fi
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -n 1)
dest=${DESTDIR:-}$prefix
install -d "$dest/lib" "$dest/include" "$dest/lib/pkgconfig"
install -m 755 "$libdir/libdaisy.so" "$dest/lib/libdaisy.so"
install -m 644 "$libdir/libdaisy.a" "$dest/lib/libdaisy.a"
install -m 644 "$here/include/daisy.h" "$dest/include/daisy.h"
sed -e "s|@PREFIX@|$prefix|" -e "s|@VERSION@|$version|" "$here/daisy.pc.in" > "$dest/lib/pkgconfig/daisy.pc"
chmod 644 "$dest/lib/pkgconfig/daisy.pc"
echo "installed libdaisy $version into $dest"
