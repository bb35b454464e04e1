#!/usr/bin/env bash
# Makes sure the binaries the tests need are installed: a MariaDB and a PostgreSQL server (the
# tests start their own throwaway instances on loopback, see tests/doubles/db_servers.py), graphviz's
# `dot`, the acl tools, and a headless Chromium with its matching chromedriver (the run report is opened in it,
# tests/browser.py), and Java 17 and Maven for the Spark cluster. Silent and fast when everything is there; installs the missing Debian packages otherwise.
set -euo pipefail

missing=()
if [[ ! -x /usr/sbin/mariadbd ]] || ! command -v mariadb-install-db >/dev/null || ! command -v mariadb >/dev/null; then
    missing+=(mariadb-server)
fi
pg_ok=0
for bin_dir in /usr/lib/postgresql/*/bin; do
    if [[ -x $bin_dir/initdb && -x $bin_dir/postgres && -x $bin_dir/pg_ctl ]]; then pg_ok=1; fi
done
((pg_ok)) || missing+=(postgresql)
command -v dot >/dev/null || missing+=(graphviz)
# setfacl/getfacl: a workspace is owner-only, and a default ACL lets one other user read serving/.
command -v setfacl >/dev/null && command -v getfacl >/dev/null || missing+=(acl)
# Debian builds chromedriver from the same source as the browser, so their versions always match.
command -v chromium >/dev/null || missing+=(chromium)
command -v chromedriver >/dev/null || missing+=(chromium-driver)
# Java 17: Beam's Spark job server and the Spark cluster the cluster tests start run on it.
command -v java >/dev/null || missing+=(openjdk-17-jre-headless)
# Maven: `make cluster-deps` resolves the job server's jars from Maven Central with it.
command -v mvn >/dev/null || missing+=(maven)
# A font the browser can draw text with (the slim images carry none).
[[ -e /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ]] || missing+=(fonts-dejavu-core)
((${#missing[@]} == 0)) && exit 0

if ((EUID == 0)); then
    as_root=()
elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    as_root=(sudo -n)
else
    echo "error: missing Debian packages: ${missing[*]}; install them as root:" >&2
    echo "  apt-get install -y --no-install-recommends ${missing[*]}" >&2
    exit 1
fi

echo "installing Debian packages: ${missing[*]}" >&2
# The packages' maintainer scripts would start system-wide MariaDB/PostgreSQL services; the tests
# don't use those, so forbid service starts (policy-rc.d exit 101) unless a policy already exists.
policy=/usr/sbin/policy-rc.d
if [[ ! -e $policy ]]; then
    "${as_root[@]}" sh -c "printf '#!/bin/sh\nexit 101\n' > $policy && chmod 755 $policy"
    trap '"${as_root[@]}" rm -f "$policy"' EXIT
fi
install=("${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}")
# Package lists may be missing (slim images) or stale (404s): refresh them only then.
if ! "${install[@]}"; then
    "${as_root[@]}" apt-get update
    "${install[@]}"
fi
