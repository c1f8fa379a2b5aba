# Sourced by .ci/run: a throwaway PostgreSQL 15 cluster with pgvector, for the tests that run on
# PostgreSQL 15 too (docs/development.md). Everything it needs comes from Debian's
# registry: the server (postgresql-15, on the image already), its headers
# (postgresql-server-dev-15) and pgvector's own source package, built here for PostgreSQL 15
# (Debian ships pgvector binaries for newer PostgreSQL versions only). What cannot be had is said
# in one line; the tests that need it then skip, saying what is missing.
# Sets EVAL_HARNESS_PG15_URL and an EXIT trap that stops the cluster.

pg15=/usr/lib/postgresql/15/bin
pg15_share=/usr/share/postgresql/15/extension
as_root_with_apt() { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; }

if [ ! -x "$pg15/initdb" ] && as_root_with_apt; then
    timeout 600 sh -c 'apt-get update -qq && apt-get install -y -qq postgresql-15' \
        >/dev/null 2>&1 || echo "could not install postgresql-15 (the PostgreSQL 15 tests will be skipped)"
fi

# pgvector for PostgreSQL 15, from the source package of the Debian release that has one,
# through apt's own client with a sources list of its own (the machine's lists are untouched);
# OPTFLAGS="": no -march=native, so the build runs on any x86-64
build_pgvector_15() {
    local work uri
    work="$(mktemp -d "${TMPDIR:-/tmp}/eval-harness-pgvector.XXXXXX")"
    # the mirror this machine already uses, from its own sources (deb822 or one-line format)
    uri="$(sed -n 's/^URIs:[[:space:]]*\([^[:space:]]*\).*/\1/p' /etc/apt/sources.list.d/*.sources \
            2>/dev/null | grep -m1 '/debian/\?$')"
    [ -n "$uri" ] || uri="$(awk '$1 == "deb" && $2 ~ /\/debian\/?$/ {print $2; exit}' \
            /etc/apt/sources.list 2>/dev/null)"
    [ -n "$uri" ] || { echo "no Debian mirror in this machine's apt sources"; return 1; }
    mkdir -p "$work/lists/partial" "$work/parts"
    echo "deb-src $uri trixie main" > "$work/sources.list"
    local apt_own=(-o "Dir::Etc::SourceList=$work/sources.list" -o "Dir::Etc::SourceParts=$work/parts"
                   -o "Dir::State::Lists=$work/lists" -o "APT::Sandbox::User=root")
    # a chain, not set -e: the caller tests this function, and bash ignores -e in there
    {
        timeout 300 apt-get update -qq \
        && timeout 600 apt-get install -y -qq postgresql-server-dev-15 dpkg-dev make gcc \
        && timeout 300 apt-get "${apt_own[@]}" update -qq \
        && (cd "$work" && timeout 300 apt-get "${apt_own[@]}" source --download-only -qq pgvector) \
        && (cd "$work" && dpkg-source --no-check -x pgvector_*.dsc pgvector) \
        && make -C "$work/pgvector" -j2 PG_CONFIG="$pg15/pg_config" OPTFLAGS="" \
        && make -C "$work/pgvector" install PG_CONFIG="$pg15/pg_config"
    } >"$work/log" 2>&1
    local status=$?
    [ "$status" -eq 0 ] || echo "pgvector for PostgreSQL 15: $(tail -n 1 "$work/log")"
    rm -rf "$work"
    return "$status"
}

if [ -z "${EVAL_HARNESS_PG15_URL:-}" ] && [ -x "$pg15/initdb" ]; then
    if [ ! -f "$pg15_share/vector.control" ]; then
        if ! as_root_with_apt || ! build_pgvector_15; then
            echo "could not build pgvector for PostgreSQL 15 (the tests that need it there will be skipped)"
        fi
    fi
    pg15_dir="$(mktemp -d "${TMPDIR:-/tmp}/eval-harness-pg15.XXXXXX")"
    as_owner=()
    if [ "$(id -u)" = 0 ] && id postgres >/dev/null 2>&1; then
        chown postgres "$pg15_dir"; as_owner=(runuser -u postgres --)
    fi
    port=$(( 55000 + RANDOM % 900 ))
    if "${as_owner[@]}" "$pg15/initdb" -D "$pg15_dir/data" -U postgres --auth=trust >/dev/null 2>&1 \
        && "${as_owner[@]}" "$pg15/pg_ctl" -D "$pg15_dir/data" -l "$pg15_dir/log" -w \
            -o "-p $port -c listen_addresses=127.0.0.1 -k $pg15_dir" start >/dev/null 2>&1; then
        export EVAL_HARNESS_PG15_URL="postgresql://postgres@127.0.0.1:$port/postgres"
        trap '"${as_owner[@]}" "$pg15/pg_ctl" -D "$pg15_dir/data" -m fast stop >/dev/null 2>&1; rm -rf "$pg15_dir"' EXIT
    else
        echo "could not start a PostgreSQL 15 cluster (the PostgreSQL 15 tests will be skipped)"
    fi
fi
