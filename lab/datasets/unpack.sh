#!/usr/bin/env bash
# Unpack the extra human interaction data sets from repository snapshots into a cache folder
# outside the project repository. Nothing here downloads anything: each snapshot is brought
# beforehand with the session tool `fetch github:<owner>/<name>`, which leaves a bare git
# directory at /work/.mirror/<owner>+<name>/repo. Data files are never copied into the repo.
#
#   lab/datasets/unpack.sh [SET ...]     SET in: sapimouse aalto-136m hmog (default all)
#
# Environment:
#   TELLTALE_MIRRORS         where the snapshots are   (default /work/.mirror)
#   TELLTALE_EXTRA_DATASETS  where the sets are written (default ~/.cache/telltale-datasets)
#
# Each set is read from one pinned commit (see its SOURCE.md). Files the snapshot lacks (blobs of
# 4 MiB and more, Git LFS pointers) are skipped and counted. A set's folder is written anew.
set -euo pipefail

MIRRORS="${TELLTALE_MIRRORS:-/work/.mirror}"
OUT="${TELLTALE_EXTRA_DATASETS:-$HOME/.cache/telltale-datasets}"

# extract GITDIR COMMIT DEST FILTER_REGEX STRIP_PREFIX PATH...
# Copies every blob under PATH at COMMIT whose path matches FILTER_REGEX to DEST, with
# STRIP_PREFIX removed from the front of its path.
extract() {
    local gitdir="$1" commit="$2" dest="$3" filter="$4" strip="$5"
    shift 5
    local copied=0 skipped=0
    while IFS=$'\t' read -r meta path; do
        # meta: "<mode> <type> <object> <size>"; size is "BAD" (or the blob is absent) when the
        # snapshot lacks the file.
        read -r _mode type object size <<<"$meta"
        [[ "$type" == "blob" ]] || continue
        [[ "$path" =~ $filter ]] || continue
        if [[ "$size" == "BAD" ]] || ! git --git-dir="$gitdir" cat-file -e "$object" 2>/dev/null; then
            skipped=$((skipped + 1))
            continue
        fi
        local rel="${path#"$strip"}"
        mkdir -p "$dest/$(dirname "$rel")"
        git --git-dir="$gitdir" cat-file blob "$object" >"$dest/$rel"
        copied=$((copied + 1))
    done < <(git --git-dir="$gitdir" ls-tree -r -l "$commit" -- "$@")
    echo "  $copied files copied, $skipped absent from the snapshot" >&2
}

stamp() {  # stamp DEST REPO COMMIT
    printf 'repository: %s\ncommit: %s\nunpacked: %s\n' "$2" "$3" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" >"$1/UNPACKED.txt"
}

need() {  # need OWNER+NAME -> prints the git dir or fails
    local gitdir="$MIRRORS/$1/repo"
    if ! git --git-dir="$gitdir" rev-parse --git-dir >/dev/null 2>&1; then
        echo "no snapshot at $gitdir: run the session tool 'fetch github:${1/+//}' first" >&2
        return 1
    fi
    echo "$gitdir"
}

unpack_sapimouse() {
    # SapiMouse raw logs (120 users), as copied into a fork of the authors' SapiAgent code.
    local repo="ttuhin03+sapiagent" commit="6b0a31a9f3f5fe78c31f66ecd39cd771411745ef"
    local gitdir dest="$OUT/sapimouse"
    gitdir="$(need "$repo")" || return 1
    echo "sapimouse <- $repo@$commit" >&2
    rm -rf "$dest" && mkdir -p "$dest"
    extract "$gitdir" "$commit" "$dest" '^sapimouse/user[0-9]+/session_[0-9_]*[0-9]+min\.csv$' "sapimouse/" sapimouse
    stamp "$dest" "github:ttuhin03/sapiagent" "$commit"
}

unpack_aalto() {
    # 136M Keystrokes (Aalto): the participants with ID <= 7001, as sub-sampled by TypeLikeU.
    local repo="wxyzz22+TypeLikeU" commit="448c2036db060d5aeed75e944986f99bc518e9c6"
    local gitdir dest="$OUT/aalto-136m"
    gitdir="$(need "$repo")" || return 1
    echo "aalto-136m <- $repo@$commit" >&2
    rm -rf "$dest" && mkdir -p "$dest"
    extract "$gitdir" "$commit" "$dest" '^data/keystroke-samples/[0-9]+_keystrokes\.txt$' "data/keystroke-samples/" data/keystroke-samples
    extract "$gitdir" "$commit" "$dest" '^data/meta_data/readme\.txt$' "data/meta_data/" data/meta_data/readme.txt
    stamp "$dest" "github:wxyzz22/TypeLikeU" "$commit"
}

unpack_hmog() {
    # HMOG (W&M / NYIT), the 9 subjects whose touch and key files a third-party repository
    # committed as plain files (later commits of that repository hold only LFS pointers).
    local repo="crimcrist+Behavioral-Based_Authentication"
    local commit="444d701a3599351a8633adbbbf9bc5c88ec09449"
    local doc_commit="37b5f5ed8eb0e913b4dd17abb676e4901561c92b"
    local gitdir dest="$OUT/hmog"
    gitdir="$(need "$repo")" || return 1
    echo "hmog <- $repo@$commit" >&2
    rm -rf "$dest" && mkdir -p "$dest"
    extract "$gitdir" "$commit" "$dest" '^public_dataset/[0-9]+/[0-9]+_session_[0-9]+/(TouchEvent|KeyPressEvent|Activity)\.csv$' "public_dataset/" public_dataset
    extract "$gitdir" "$doc_commit" "$dest" '^public_dataset/data_description\.pdf$' "public_dataset/" public_dataset/data_description.pdf
    stamp "$dest" "github:crimcrist/Behavioral-Based_Authentication" "$commit"
}

sets=("$@")
[[ ${#sets[@]} -gt 0 ]] || sets=(sapimouse aalto-136m hmog)
status=0
for set in "${sets[@]}"; do
    case "$set" in
        sapimouse) unpack_sapimouse || status=1 ;;
        aalto-136m) unpack_aalto || status=1 ;;
        hmog) unpack_hmog || status=1 ;;
        *) echo "unknown set: $set (sapimouse, aalto-136m, hmog)" >&2; status=1 ;;
    esac
done
exit $status
