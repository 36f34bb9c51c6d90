# Sourced by build-cuda.sh and build-hip.sh: a GPU build is skipped while its outputs are newer than
# every one of its inputs and were built with the same configuration.
#
#   sc_stamp_fresh STAMP CONFIG "OUTPUT..." INPUT...
#       true when STAMP holds CONFIG, every OUTPUT exists and no INPUT (file or directory, searched
#       recursively) was modified after STAMP
#   sc_stamp_begin STAMP CONFIG   before compiling: removes STAMP and writes CONFIG to STAMP.new,
#                                 whose time is the build's start (a source saved during the build
#                                 is newer than it)
#   sc_stamp_commit STAMP         after a successful build: STAMP.new becomes STAMP

sc_stamp_fresh() {
  local stamp=$1 config=$2 outputs=$3; shift 3
  [[ -f $stamp && "$(cat "$stamp")" == "$config" ]] || return 1
  local o
  for o in $outputs; do [[ -e $o ]] || return 1; done
  [[ -z "$(find "$@" -newer "$stamp" -print -quit 2>/dev/null)" ]]
}

sc_stamp_begin() {
  rm -f "$1"
  mkdir -p "$(dirname "$1")"
  printf '%s' "$2" > "$1.new"
}

sc_stamp_commit() { mv -f "$1.new" "$1"; }
