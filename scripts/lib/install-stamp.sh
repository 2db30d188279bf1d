# Sourced by scripts/loom-memory and scripts/test: install into a virtualenv only when what
# the install depends on changed since the last one that succeeded. The code is installed
# editable, so editing it needs no install; the package definitions, the interpreter and
# the installing script do.
#
#   if install_needed "$VENV" "$STAMP" file...; then <install>; install_done "$STAMP"; fi
#
# install_needed: true when LOOM_REINSTALL=1, when there is no stamp (a fresh clone, a new
# .venv) or when the hash of the files and of `$VENV/bin/python -VV` differs from it.
# install_done: records that hash (call it only once the install succeeded).

install_needed() {
    local venv="$1" stamp="$2"
    shift 2
    INSTALL_WANT="$(cat "$@" | cat - <("$venv/bin/python" -VV) | sha256sum | cut -d' ' -f1)"
    [ "${LOOM_REINSTALL:-0}" = 1 ] || [ "$(cat "$stamp" 2>/dev/null)" != "$INSTALL_WANT" ]
}

install_done() {
    echo "$INSTALL_WANT" >"$1"
}
