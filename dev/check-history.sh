#!/usr/bin/env bash
# Checks the tracked files for two things and fails (exit 1) on either:
#  1. development-history references: numbered work periods, run-history suffixes in file names,
#     ticket references, this repository's branch names (other than main), and commit ids;
#  2. relative Markdown links (in tracked *.md files) whose target does not exist.
# Run from anywhere in the work tree: dev/check-history.sh. .ci/run runs it before the build.
#
# What each rule matches, and what it lets through:
#  - work periods: the word "session" or "sessions" followed by a number ("SparkSession" and
#    "session" without a number pass); an "S<number> run/build/table/log/library" label.
#  - run-history suffixes: a tracked file whose name ends in -s<number>[letter], optionally
#    followed by a machine tag such as -2xH200, before its extension; and any such file name in text.
#  - tickets: "issue N", "issue #N", "ticket N", "bug #N", "PR #N", and "task N" except where the
#    line speaks of Spark tasks (it names an executor, partition, stage, attempt or task id).
#  - branches: every local and remote-tracking branch except main. A name with a dash, slash or
#    underscore is refused as a word of its own (not inside a longer dashed identifier such as
#    sparkcomms-rpc-auth); a plain word (such as "kills") only next to the word "branch". Any
#    "branch `name`" other than main is refused too.
#  - commit ids: outside bench/results/ (run records that name the build they measured), a 7..40
#    hex token next to the word "commit", and any token that is the id of a commit in this
#    repository (so hex constants in code, UUIDs in fixtures and "sm_90" pass).
#  - stale paths: a path under bench/ named anywhere in the text that does not exist.
set -uo pipefail
cd "$(git rev-parse --show-toplevel)" || exit 2

self=dev/check-history.sh
failed=$(mktemp)
trap 'rm -f "$failed"' EXIT
report() {  # report TITLE < lines; runs in a pipeline's subshell, so it marks failure in a file
  local out
  out=$(cat)
  if [[ -n $out ]]; then
    echo "check-history: $1:"
    printf '%s\n' "$out" | sed 's/^/  /'
    echo x >>"$failed"
  fi
}
# git grep over the tracked text files, this script excluded; extra pathspecs after the pattern.
tgrep() {
  local pat=$1
  shift
  git grep -n -I -E "$pat" -- . ":(exclude)$self" "$@"
}

# ---- 1. history references ----
tgrep '(^|[^A-Za-z])[Ss]essions?[ -]?#?[0-9]' | report 'numbered work periods ("session N")'
tgrep '(^|[^A-Za-z0-9_])[Ss][0-9]+[a-z]? (run|runs|build|table|log|library)([^A-Za-z]|$)' |
  report 'run labels ("S<n> run")'

git ls-files | grep -E -- '-s[0-9]+[a-z]?(-[0-9]+x[^/]*)?\.[^/]+$' | report 'file names with a run-history suffix (-s<n>)'
tgrep '[A-Za-z0-9]-s[0-9]+[a-z]?(-[0-9]+x[A-Za-z0-9]+)?\.(log|csv|md|txt|json)([^A-Za-z0-9]|$)' |
  report 'references to file names with a run-history suffix'

tgrep '(^|[^A-Za-z])([Ii]ssue|[Tt]icket|[Bb]ug)s? #?[0-9]+([^0-9]|$)|(^|[^A-Za-z])(PR|[Pp]ull request) #[0-9]+' |
  report 'ticket references'
tgrep '(^|[^A-Za-z])[Tt]asks? #?[0-9]+([^0-9]|$)' |
  grep -v -E '[Ee]xecutor|[Pp]artition|[Ss]tage|[Aa]ttempt|TaskContext|task ?[Ii]d' |
  report 'task references'

branches=$(git for-each-ref --format='%(refname:short)' refs/heads refs/remotes |
  sed -E 's#^[^/]+/##; /^HEAD$/d' | sort -u)
for b in $branches; do
  [[ $b == main || $b == master || $b == origin ]] && continue
  q=$(printf '%s' "$b" | sed 's/[.[\*^$()+?{}|]/\\&/g')
  if [[ $b == *[-/_]* ]]; then
    tgrep "(^|[^A-Za-z0-9_./-])$q([^A-Za-z0-9_/-]|$)" | report "branch name '$b'"
  else
    tgrep "[Bb]ranch(es)?[: ]+[\`'\"]?$q([^A-Za-z0-9_-]|$)|(^|[^A-Za-z0-9_-])$q[\`'\"]? branch([^A-Za-z-]|\$)" |
      report "branch name '$b' (next to \"branch\")"
  fi
done
tgrep "[Bb]ranch(es)? [\`'\"][A-Za-z0-9._/-]+[\`'\"]|[\`'\"][A-Za-z0-9._/-]+[\`'\"] branch([^A-Za-z-]|$)" |
  grep -v -E "[\`'\"](main|master)[\`'\"]" | report 'named branches'

tgrep '(^|[^A-Za-z])[Cc]ommits?[ :]+[`(]?[0-9a-f]{7,40}([^0-9A-Za-z]|$)|(^|[^0-9A-Za-z])[0-9a-f]{7,40}[`)]? commit' \
  ':(exclude)bench/results' | report 'commit ids next to the word "commit"'
# Tokens of 7..40 hex digits with at least one digit and one letter that name a commit here.
cands=$(git grep -h -o -I -E '(^|[^0-9A-Za-z_])[0-9a-f]{7,40}([^0-9A-Za-z_]|$)' -- . ":(exclude)$self" \
  ':(exclude)bench/results' | grep -o -E '[0-9a-f]{7,40}' | grep '[0-9]' | grep '[a-f]' | sort -u)
if [[ -n $cands ]]; then
  ids=$(printf '%s\n' "$cands" | git cat-file --batch-check='%(objecttype) %(rest)' 2>/dev/null |
    awk '$1 == "commit" {print}' || true)
  hits=$(printf '%s\n' "$cands" | while read -r h; do
    t=$(git cat-file -t "$h" 2>/dev/null) && [[ $t == commit ]] && echo "$h"
  done)
  for h in $hits; do
    tgrep "(^|[^0-9A-Za-z_])$h([^0-9A-Za-z_]|$)" ':(exclude)bench/results'
  done | report 'commit ids of this repository'
fi

# Paths under bench/ named in the text must exist (the results move into dated folders; a name
# left behind points nowhere). Templates with <...> or * are skipped.
git grep -n -o -I -E 'bench/[A-Za-z0-9._/<>*-]+' -- . ":(exclude)$self" | while IFS= read -r hit; do
  ref=${hit#*:*:}
  ref=${ref%%[.,;:)]}
  ref=${ref%.}
  [[ $ref == *[\<\>*]* ]] && continue
  [[ -e $ref ]] || echo "$hit"
done | report 'paths under bench/ that do not exist'

# ---- 2. relative Markdown links ----
git ls-files -z -- '*.md' | while IFS= read -r -d '' md; do
  dir=$(dirname "$md")
  # inline links and images: ](target) or ](target "title"); reference definitions: [x]: target
  { grep -n -o -E '\]\([^)[:space:]]+' "$md" | sed -E 's/\]\(//'
    grep -n -o -E '^ {0,3}\[[^]]+\]:[[:space:]]+[^[:space:]]+' "$md" | sed -E 's/\[[^]]+\]:[[:space:]]+//'
  } | while IFS= read -r hit; do
    line=${hit%%:*}
    target=${hit#*:}
    target=${target#<}
    target=${target%>}
    case $target in
      '' | '#'* | *://* | mailto:* | tel:*) continue ;;
    esac
    path=${target%%#*}
    path=${path%%\?*}
    [[ -z $path ]] && continue
    if [[ $path == /* ]]; then full=.${path}; else full=$dir/$path; fi
    [[ -e $full ]] || echo "$md:$line: $target"
  done
done | report 'relative Markdown links that do not resolve'

if [[ -s $failed ]]; then
  echo "check-history: FAILED" >&2
  exit 1
fi
echo "check-history: OK ($(git ls-files | wc -l | tr -d ' ') tracked files: no history references, every relative Markdown link resolves)"
