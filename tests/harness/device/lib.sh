# Shared by the scripts that run ON the device machine (gpu-run.sh, gpu-collection-run.sh): timed log lines
# and the kit (the parts gpu-kit.sh made, copied to /tmp/kit by earlier `run` calls) checked and unpacked.
# The caller sets T0, R (its run folder, with summary.txt) and defines finish().
log() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a "$R/summary.txt"; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# unpack_kit DIR: every part present (sha256 of the whole) and unpacked into DIR, or finish 1 with the reason.
unpack_kit() {
  local site="$1" want got s unpack
  cp .whl-gpu/p*/kit.part-* .whl-gpu/p*/kit.sha256 /tmp/kit/ 2>/dev/null
  ( cd /tmp/kit && ls kit.part-* | tr '\n' ' ' ) | tee -a "$R/summary.txt"; echo | tee -a "$R/summary.txt"
  want=$(cut -d' ' -f1 /tmp/kit/kit.sha256)
  got=$(cat /tmp/kit/kit.part-* | sha256sum | cut -d' ' -f1)
  [ "$want" = "$got" ] || { log "kit checksum mismatch ($got != $want): a part is missing"; finish 1; }
  s=$(now)
  # kit.sha256 names the packed file: kit.tar.xz (gpu-kit.sh's default) or kit.tar.gz (KIT_COMPRESS=gzip)
  case $(awk '{print $2}' /tmp/kit/kit.sha256) in
    *.gz) unpack=(gzip -d) ;;
    *) unpack=(xz -d -T0) ;;
  esac
  cat /tmp/kit/kit.part-* | "${unpack[@]}" | tar -C "$site" -xf - || { log "unpack failed"; finish 1; }
  log "kit unpacked in $(since "$s") s: $(du -sm "$site" | cut -f1) MiB"
}
