#!/usr/bin/env bash
# setup.sh -- unpack the payload of deploy/offline-gpu/build.sh on the GPU host into /root/site.
#
# Upload 1 (p1):       mkdir -p /root/gpu-stage && cp .gpu/p1/* /root/gpu-stage/
# Upload 2 (p2, p3):   bash .gpu/p2/setup.sh      (from the folder that holds .gpu)
# Afterwards:          . /root/gpu-env.sh && tuner --help
#
# Copies p2 into /root/gpu-stage, checks every piece against SHA256SUMS, joins the two pieces of
# C, unpacks the four archives into /root/site, installs the wheels of p3 beside p2 (the tuner and
# its dependencies) and any *.whl in the stage, and writes /root/gpu-env.sh (PYTHONPATH, PATH for
# the `tuner` command). Safe to rerun: an unpack of this same payload is kept (FORCE=1 redoes it).
set -euo pipefail
STAGE=${STAGE:-/root/gpu-stage}
SITE=${SITE:-/root/site}
ENV_FILE=${ENV_FILE:-/root/gpu-env.sh}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
die() { echo "setup.sh: $*" >&2; exit 1; }

mkdir -p "$STAGE"
[ "$HERE" = "$(cd "$STAGE" && pwd)" ] || cp -f "$HERE"/* "$STAGE"/
cd "$STAGE"
# a p1 folder kept beside p2 in the checkout from upload 1 will do as well
if [ ! -f C.tar.xz.part-00 ] && [ -f "$HERE/../p1/C.tar.xz.part-00" ]; then
  cp "$HERE/../p1/C.tar.xz.part-00" .
fi
[ -f C.tar.xz.part-00 ] || die "$STAGE/C.tar.xz.part-00 is missing, so this machine is not the one" \
  "that got upload 1 (it was recycled): do upload 1 again, then rerun this."
sha256sum --quiet -c SHA256SUMS || die "the pieces in $STAGE do not match SHA256SUMS (part-00 from" \
  "another build?): do upload 1 again with this build's p1, then rerun this."

stamp=$(sha256sum SHA256SUMS | cut -d' ' -f1)
if [ "${FORCE:-0}" != 1 ] && [ "$(cat "$SITE/.payload" 2>/dev/null)" = "$stamp" ]; then
  echo "setup.sh: $SITE already holds this payload (FORCE=1 unpacks it again)"
else
  SECONDS=0
  rm -rf "$SITE.new"; mkdir -p "$SITE.new"
  cat C.tar.xz.part-00 C.tar.xz.part-01 > C.tar.xz
  pids=()
  for f in C rest fa3 deps_rest; do            # the four archives hold disjoint files
    tar -xJf "$f.tar.xz" -C "$SITE.new" & pids+=($!)
  done
  ok=1; for p in "${pids[@]}"; do wait "$p" || ok=0; done
  rm -f C.tar.xz
  [ "$ok" = 1 ] || die "unpacking into $SITE.new failed (see the messages above)."
  echo "$stamp" > "$SITE.new/.payload"
  rm -rf "$SITE"; mv "$SITE.new" "$SITE"
  echo "setup.sh: unpacked into $SITE in ${SECONDS}s ($(du -sh "$SITE" | cut -f1))"
fi

shopt -s nullglob
if [ -d "$HERE/../p3" ]; then
  (cd "$HERE/../p3" && sha256sum --quiet -c SHA256SUMS) || die "the wheels in $HERE/../p3 do not match" \
    "its SHA256SUMS: upload p3 again."
  cp -f "$HERE"/../p3/*.whl .
fi
wheels=(*.whl)
if [ ${#wheels[@]} -gt 0 ]; then
  PIP_ROOT_USER_ACTION=ignore python3 -m pip install -q --no-index --no-deps --no-compile \
    --upgrade --target "$SITE" "${wheels[@]}"
  echo "setup.sh: installed ${#wheels[@]} extra wheel(s) into $SITE"
fi

cat > "$ENV_FILE" <<EOF
# vLLM 0.26.0 from $SITE (written by setup.sh)
case ":\${PYTHONPATH:-}:" in *:$SITE:*) ;; *) export PYTHONPATH=$SITE\${PYTHONPATH:+:\$PYTHONPATH} ;; esac
case ":\$PATH:" in *:$SITE/bin:*) ;; *) export PATH=$SITE/bin:\$PATH ;; esac
export VLLM_USE_FLASHINFER_SAMPLER=0 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1
EOF
. "$ENV_FILE"
python3 -c "import vllm, torch; print('setup.sh: vllm', vllm.__version__, 'torch', torch.__version__)" \
  || die "vllm does not import (see the error above)."
if [ -x "$SITE/bin/tuner" ]; then
  tuner --help > /dev/null || die "the tuner does not start (see the error above)."
  echo "setup.sh: tuner $(python3 -c 'import importlib.metadata as m; print(m.version("specdec-tuner"))')"
fi
echo "setup.sh: ready; start later commands with: . $ENV_FILE"
