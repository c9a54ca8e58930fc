# Sourced by arena.sh and test.sh, from the repository root: sets PY, the Python to install
# into and run with. Inside a virtual environment already (VIRTUAL_ENV set, or python3 is a
# venv's), that one is used. Otherwise the project's own .venv is created if missing and
# used, so that nothing is installed into the system Python (which Debian and Ubuntu refuse,
# PEP 668).

if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "shopbench needs Python 3.11 or newer; python3 is $(python3 -V 2>&1)" >&2
  exit 1
fi
in_venv='import sys; sys.exit(sys.prefix == sys.base_prefix)'
if [ -n "${VIRTUAL_ENV:-}" ] || python3 -c "$in_venv"; then
  PY=python3
elif [ -x .venv/bin/python ]; then
  echo "not inside a virtual environment: using the project's .venv" >&2
  PY=.venv/bin/python
else
  echo "not inside a virtual environment: creating the project's .venv to install into" >&2
  if ! python3 -m venv .venv; then
    rm -rf .venv
    echo "could not create .venv: install Python's venv module" \
      "(Debian/Ubuntu: apt install python3-venv)" >&2
    exit 1
  fi
  PY=.venv/bin/python
fi
