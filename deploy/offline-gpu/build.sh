#!/usr/bin/env bash
# deploy/offline-gpu/build.sh OUTDIR -- everything an offline GPU host needs to run specdec tuner:
# vLLM 0.26.0's GPU build (CUDA 13.0) and the tuner with its own dependencies, built on a machine
# that reaches PyPI. Steps on the GPU host: docs/guide/gpu-host.md#installing-offline ("Installing offline"), README.md.
#
# The host this was made for has Python 3.12 and torch 2.11.0+cu130 but no network, and one upload
# carries at most 64 MiB. vLLM 0.26.0 is the newest release that pins torch==2.11.0. This script
# takes its PyPI wheel and the 82 small runtime dependencies such a host lacks, all pinned by
# version and sha256 (list at the end), and packs them for uploads of at most 44 MiB each:
#   OUTDIR/p1/  C.tar.xz.part-00          first piece of the _C_stable_libtorch extension
#   OUTDIR/p2/  C.tar.xz.part-01          the second piece
#               rest.tar.xz               vllm's Python code and small extensions
#               fa3.tar.xz                _vllm_fa3_C (FlashAttention 3)
#               deps_rest.tar.xz          the dependencies, unzipped site-packages style
#               SHA256SUMS, setup.sh, mkmodel.py  (setup.sh unpacks it all on the host)
#   OUTDIR/p3/  specdec_tuner-*.whl and the wheels of its dependencies that the host lacks
#               (tuner-deps.txt, pinned by version; setup.sh installs them beside vLLM)
# To fit, these parts of the vllm wheel are left out: the FA2 and MoE extensions, the Rust
# frontend (vllm-rs), deep_gemm and fmha_sm100. C is cut so that p1 and p2 weigh about the same.
#
# Rerunnable: wheels stay cached in OUTDIR/wheels (no network needed once all are there), an
# archive whose content is unchanged is not compressed again, p1/ to p3/ are rebuilt each time.
# Needs bash, python3 with pip (PYTHON=... to pick another; PIP_ARGS=... adds pip options such
# as --isolated), GNU tar, xz and sha256sum. Compression runs under nice, with one xz thread.
set -euo pipefail
umask 022

LIMIT=$((44 * 1024 * 1024))
EPOCH=1767225600                     # 2026-01-01: one mtime for every archived file (reproducible)
PY=${PYTHON:-python3}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

die()  { echo "build.sh: $*" >&2; exit 1; }
size() { stat -c %s "$@" | awk '{s += $1} END {print s + 0}'; }
mib()  { awk -v b="$1" 'BEGIN {printf "%.2f MiB", b / 1048576}'; }

main() {
  [ $# -eq 1 ] || die "usage: build.sh OUTDIR"
  mkdir -p "$1"; OUT=$(cd "$1" && pwd)
  W=$OUT/wheels B=$OUT/build T=$OUT/build/trees
  mkdir -p "$W" "$B"
  echo '*' > "$OUT/.gitignore"       # inside a checkout, git ignores all of it
  [ -f "$HERE/setup.sh" ] || die "setup.sh must sit beside this script."
  pins > "$B/requirements.txt"

  echo "== wheels (pinned by sha256, cached in $W)"
  if wheels check; then
    echo "  all present"
  else
    "$PY" -m pip --version >/dev/null 2>&1 || die "$PY has no pip (set PYTHON to a python3 with pip)."
    "$PY" -m pip download -qq --no-deps --only-binary=:all: --require-hashes \
      --python-version 3.12 --implementation cp \
      --platform manylinux_2_34_x86_64 --platform manylinux_2_31_x86_64 \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
      --platform manylinux_2_26_x86_64 --platform manylinux_2_24_x86_64 \
      --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
      --platform manylinux1_x86_64 ${PIP_ARGS:-} -r "$B/requirements.txt" -d "$W"
  fi

  echo "== unzip and split"
  rm -rf "$T"
  wheels unpack

  echo "== compress (xz -9, one thread)"
  for name in C rest fa3 deps_rest; do mktar "$name"; done
  rm -rf "$T"

  echo "== p1 and p2"
  rm -rf "$OUT/p1" "$OUT/p2"; mkdir -p "$OUT/p1" "$OUT/p2"
  local c rest cut
  c=$(size "$B/C.tar.xz")
  rest=$(size "$B/rest.tar.xz" "$B/fa3.tar.xz" "$B/deps_rest.tar.xz")
  cut=$(( (c + rest + 1) / 2 )); [ "$cut" -le "$c" ] || cut=$c
  head -c "$cut" "$B/C.tar.xz" > "$OUT/p1/C.tar.xz.part-00"
  tail -c +$((cut + 1)) "$B/C.tar.xz" > "$OUT/p2/C.tar.xz.part-01"
  cp "$B/rest.tar.xz" "$B/fa3.tar.xz" "$B/deps_rest.tar.xz" "$HERE/setup.sh" "$OUT/p2/"
  if [ -f "$HERE/mkmodel.py" ]; then cp "$HERE/mkmodel.py" "$OUT/p2/"; fi
  { (cd "$OUT/p1" && sha256sum C.tar.xz.part-00)
    (cd "$OUT/p2" && sha256sum C.tar.xz.part-01 rest.tar.xz fa3.tar.xz deps_rest.tar.xz)
  } > "$OUT/p2/SHA256SUMS"

  echo "== the tuner and its dependencies the host lacks (p3)"
  rm -rf "$OUT/p3"; mkdir -p "$OUT/p3"
  "$PY" -m pip wheel -qq --no-deps --no-build-isolation -w "$OUT/p3" "$HERE/../.." \
    || "$PY" -m pip wheel -qq --no-deps -w "$OUT/p3" "$HERE/../.." || die "could not build the tuner's wheel."
  "$PY" -m pip download -qq --no-deps --only-binary=:all: \
    --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    ${PIP_ARGS:-} -r "$HERE/tuner-deps.txt" -d "$OUT/p3"
  (cd "$OUT/p3" && sha256sum *.whl > SHA256SUMS)

  echo "== sizes"
  for f in "$OUT"/p1/* "$OUT"/p2/*; do printf '  %-24s %10d bytes\n' "${f#"$OUT"/}" "$(size "$f")"; done
  for f in "$OUT"/p3/*; do printf '  %-24s %10d bytes\n' "${f#"$OUT"/}" "$(size "$f")"; done
  for p in p1 p2 p3; do
    n=$(size "$OUT/$p"/*)
    printf '  %s total %d bytes = %s (limit 44 MiB)\n' "$p" "$n" "$(mib "$n")"
    [ "$n" -le "$LIMIT" ] || die "$p is $(mib "$n"), more than the 44 MiB one upload may carry."
  done
  echo "done in ${SECONDS}s: upload $OUT/p1 first, then $OUT/p2 with $OUT/p3 (docs/guide/gpu-host.md#installing-offline, \"Installing offline\")."
}

# mktar NAME: build/NAME.tar.xz from build/trees/NAME; xz runs only when the tar's content changed.
mktar() {
  local name=$1 tarf=$B/$1.tar sum
  tar --sort=name --mtime=@$EPOCH --owner=0 --group=0 --numeric-owner -C "$T/$name" -cf "$tarf" .
  sum=$(sha256sum "$tarf" | cut -d' ' -f1)
  if [ -f "$B/$name.tar.xz" ] && [ "$(cat "$B/$name.tar.sha256" 2>/dev/null)" = "$sum" ]; then
    echo "  $name.tar.xz unchanged"
  else
    echo "  $name.tar.xz from $(mib "$(size "$tarf")")"
    nice -n 19 xz -9 -T1 -c "$tarf" > "$B/$name.tar.xz.tmp"
    mv "$B/$name.tar.xz.tmp" "$B/$name.tar.xz"
    echo "$sum" > "$B/$name.tar.sha256"
  fi
  rm -f "$tarf"
}

# wheels check: are all pinned wheels in OUTDIR/wheels?  wheels unpack: unzip them into
# build/trees/{C,fa3,rest,deps_rest}, taking the heavy optional parts out of the vllm wheel.
wheels() {
  "$PY" - "$1" "$B/requirements.txt" "$W" "$T" <<'PYEOF'
import hashlib, os, shutil, sys, zipfile
mode, req, wheel_dir, trees = sys.argv[1:]
want = {}                                       # sha256 -> "name==version"
for line in open(req):
    if "--hash=sha256:" in line:
        want[line.split("--hash=sha256:")[1].split()[0]] = line.split()[0]
found = {}                                      # "name==version" -> wheel path
for f in sorted(os.listdir(wheel_dir)):
    if f.endswith(".whl"):
        h = hashlib.sha256()
        with open(os.path.join(wheel_dir, f), "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        if h.hexdigest() in want:
            found[want[h.hexdigest()]] = os.path.join(wheel_dir, f)
missing = sorted(set(want.values()) - set(found))
if mode == "check":
    sys.exit(1 if missing else 0)
if missing:
    sys.exit("build.sh: no wheel with the pinned sha256 for " + ", ".join(missing))

def unzip(wheel, dest):                         # as a plain unzip would, keeping file modes
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            path = z.extract(info, dest)
            if not info.is_dir() and (info.external_attr >> 16) & 0o777:
                os.chmod(path, (info.external_attr >> 16) & 0o777)

rest = os.path.join(trees, "rest")
unzip(found.pop("vllm==0.26.0"), rest)
for drop in ["vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so",   # FlashAttention 2 (290 MiB)
             "vllm/_moe_C_stable_libtorch.abi3.so",         # MoE kernels
             "vllm/vllm-rs",                                # optional Rust frontend
             "vllm/third_party/deep_gemm",
             "vllm/third_party/fmha_sm100"]:
    path = os.path.join(rest, drop)
    if not os.path.lexists(path):
        sys.exit("build.sh: the vllm wheel has no " + drop)
    shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
for part, path in [("C", "vllm/_C_stable_libtorch.abi3.so"),
                   ("fa3", "vllm/vllm_flash_attn/_vllm_fa3_C.abi3.so")]:
    os.makedirs(os.path.dirname(os.path.join(trees, part, path)))
    os.rename(os.path.join(rest, path), os.path.join(trees, part, path))
for name in sorted(found):
    unzip(found[name], os.path.join(trees, "deps_rest"))
print("  vllm split into C, fa3, rest; %d dependencies unzipped" % len(found))
PYEOF
}

# Every wheel, pinned by version and by the sha256 of its PyPI file. The dependencies are those
# of vllm 0.26.0 that the host lacks, less the heavy or clashing ones (README.md); xgrammar
# needs apache-tvm-ffi and torch-c-dlpack-ext.
pins() {
  cat <<'EOF'
vllm==0.26.0 --hash=sha256:adb1e4c9b46d0dfdb094121ae5aad670a42412dd813ed4e5db069ed6a15006de
agent-detector==2.0.0 --hash=sha256:22c6a1c9c23894a12f55aea625f060b8d3330fba774de72d02d5442bb580417f
annotated-types==0.8.0 --hash=sha256:f072f4d804ea359e4eaf198b1af7a8b0943881a87f31bb764f8bf219bb9419e0
anthropic==2.14.0 --hash=sha256:5cf986851f61c0858ac88c6f7c28490369a68ff4a89c309849605b764da0664d
apache-tvm-ffi==0.1.10 --hash=sha256:96b69030c722572e13e30182733adfa2d604258e988b3f6630a16f397c7f9288
astor==0.8.1 --hash=sha256:070a54e890cefb5b3739d19f30f5a5ec840ffc9c50ffa7d23cc9fc1a38ebbfc5
blake3==1.0.11 --hash=sha256:33424c686b291c7682b5816fe9320466dbc0a457ef7e15c273c804a2d70fea70
cachetools==8.0.2 --hash=sha256:502bf3c17c6e35d78ccdaa70da8c7001b28634541f5cde0dee33c93bb252277d
cbor2==6.3.0 --hash=sha256:4f160b662059cc30ced4436fca332f4c27d0259698a5bde8373c9c6f829aabdf
cffi==2.1.1 --hash=sha256:c1453022f490d2459a11819d83ad1d586e9ff65a12ac3e705ffebd46d3685dcf
compressed-tensors==0.17.0 --hash=sha256:4a1b89b508f7efb8ffb4eee8a6e69e0452d9b080cae130146025c64fbe9fa9aa
cryptography==50.0.2 --hash=sha256:9dab55f57c74c3cad24c323bacbbd04be4705ba6eb0d92e920b1fc4837ed5079
depyf==0.20.0 --hash=sha256:d31effad4261cebecb58955d832e448ace88f432328f95f82fd99c30fd9308d4
detect-installer==0.2.1 --hash=sha256:87e2ce7d05cb108b178f8e45bb80d3d88c0cb4b397983345c18ad6562e02e620
dill==0.4.1 --hash=sha256:1e1ce33e978ae97fcfcff5638477032b801c46c7c65cf717f95fbc2248f79a9d
dnspython==2.9.2 --hash=sha256:af15f7d385a6ae2fb35a796fde2138004c8c42c7389090e2addc83e3b3340fd8
docstring-parser==0.18.0 --hash=sha256:b3fcbed555c47d8479be0796ef7e19c2670d428d72e96da63f3a40122860374b
email-validator==2.4.0 --hash=sha256:4454e41c4e1c6b6caee34a1dc71d5e736791562be8fd179b02e298f796522684
fastapi-cli==0.0.34 --hash=sha256:4a1185b66308c7543e98957426a8ecd205d58853514cb9a68c78066f2e6e467b
fastapi-cloud-cli==0.28.0 --hash=sha256:e1409bc42017a86f8092fdf1dd64ead129698936cfeb151a6c3e023f611fd620
fastapi==0.136.3 --hash=sha256:3d2a69bdf04b7e9f3afa292c3bc7a98816bbfafa10bc9b45f3f3700d2f761620
fastar==0.12.0 --hash=sha256:deb0b3882626832361dd0fcee1f4ef1c6e2a7aaa4165e51c86ae0bab95caccd6
googleapis-common-protos==1.76.0 --hash=sha256:59e13344a9f3651aa201a03e2bee815a3bf43a4baf1f9ff8a9b62a840ce25fac
httpcore2==2.16.2 --hash=sha256:16051ae2a42f776007543f32de9349a317b23d2cbb4e1456b4bac0e88b87419a
httptools==0.9.0 --hash=sha256:3e3201fe4d46e0d15d7ff9fafc94a605da9eb82d2c5b9837f0368acb325481f1
httpx2==2.16.2 --hash=sha256:f05c13aade4c45dbf1c9060647a1058f0acad62398fad96e741269edb33d46f5
ijson==3.6.0 --hash=sha256:c14d568d31a322e8ed7e9735f6e355608a23cc6ff4b5da843515089dae4cbf5f
interegular==0.3.3 --hash=sha256:b0c07007d48c89d6d19f7204972d369b2a77222722e126b6aa63aa721dc3b19c
jiter==0.19.0 --hash=sha256:0956b5f58b804221dfb929c120e6d4032138fed20c1cc0ef683a2d1326255e46
jmespath==1.1.0 --hash=sha256:a5663118de4908c91729bea0acadca56526eb2698e83de10cd116ae0f4e97c64
jsonschema-specifications==2025.9.1 --hash=sha256:98802fee3a11ee76ecaca44429fda8a41bff98b00a0f2838151b113f210cc6fe
jsonschema==4.26.0 --hash=sha256:d489f15263b8d200f8387e64b4c3a75f06629559fb73deb8fdfb525f2dab50ce
lark==1.2.2 --hash=sha256:c2276486b02f0f1b90be155f2c8ba4a8e194d42775786db622faccd652d8e80c
llguidance==1.7.6 --hash=sha256:ceec951d29a74309984e3be0fe7f5f56c1362434cd937abd517b259a60908b1e
lm-format-enforcer==0.11.3 --hash=sha256:cf586350875def1ae7a8fba84fcbbfc8371424b6c9d05c1fcba70aa233fbf06f
loguru==0.7.3 --hash=sha256:31a33c10c8e1e10422bfd431aeb5d351c7cf7fa671e3c4df004162264b28220c
mcp-types==2.3.0 --hash=sha256:968efdbdaedfab06adae40d378a34395f1090c5921d4be3c9cde283aaf76d91d
mcp==2.3.0 --hash=sha256:dd0c44c089d16453e8ae31a3877a0054d7a2314caaa81f5e0541b9b1734b2377
model-hosting-container-standards==0.1.16 --hash=sha256:47f4f65713120bc3a69feb022981a38db9e557aedf88dbd72077f20588caa12b
msgspec==0.23.0 --hash=sha256:c08f294663135183bd633efd843645687285a445054a876c37506d4e9de7d80b
openai-harmony==0.0.8 --hash=sha256:c007d277218a50db8839e599ed78e0fffe5130f614c3f6d93ae257f282071a29
openai==3.57.0 --hash=sha256:f97bc74024c06ced8428b56c4a3594066709d3082779bf9d0b4b6092fbf587a8
opentelemetry-api==1.45.2 --hash=sha256:2cbd737377e710ee740d261c94e93fa0f08e6d037c18f17513cc0a2d94479a34
opentelemetry-exporter-http-transport==0.66b2 --hash=sha256:fd5f5b490c099acda1cd7b909d5e8981436bf18cc8c6098d302d114c271720e9
opentelemetry-exporter-otlp-common==0.66b2 --hash=sha256:ace86efb75489f925f1ef809856ae5f0c7db534e4afdc624530222228b1236a5
opentelemetry-exporter-otlp-proto-common==1.45.2 --hash=sha256:af483b24217028892f017096731b794b196b785025d2e6808874720fd0b05a80
opentelemetry-exporter-otlp-proto-grpc==1.45.2 --hash=sha256:8a48d60835e90536846bd82de487bfbd81bccb5a1b3d0fb82edeea17db07395c
opentelemetry-exporter-otlp-proto-http==1.45.2 --hash=sha256:6e4d025138829d0ee57946930c2ccad6491ad4d92a958e9c7eea69278fe60cfc
opentelemetry-exporter-otlp==1.45.2 --hash=sha256:52c8b9f268289c92c08b3a97f48c63d6e5c037f25ca1f6f29ef162fb78974afc
opentelemetry-proto==1.45.2 --hash=sha256:03a7ca1b43f89fd5b965d5975902bb2515c0c86e2428b456836e9a6149c6235a
opentelemetry-sdk==1.45.2 --hash=sha256:ff974ea70ee4f1d51e2ec152db37c2b626c7bf82bb3f7d86114fd8704e7199c6
opentelemetry-semantic-conventions-ai==0.5.1 --hash=sha256:25aeb22bd261543b4898a73824026d96770e5351209c7d07a0b1314762b1f6e4
opentelemetry-semantic-conventions==0.66b2 --hash=sha256:4cbe61e5f9275d57ab31708446e7938ef4291ebbe6a7fca6f7a629c5acae87d8
outlines-core==0.2.14 --hash=sha256:3bb2060c240c4507f334965a8948dbeeb22007560d797f6debd92346c0b620cb
partial-json-parser==0.2.1.1.post7 --hash=sha256:145119e5eabcf80cbb13844a6b50a85c68bf99d376f8ed771e2a3c3b03e653ae
prometheus-fastapi-instrumentator==8.1.0 --hash=sha256:b9f40b2cff3f7891ca0610b3ae4fc6ec723fd326b04bb659819aaeb821a0fc7d
pybase64==1.5.1 --hash=sha256:c212d02fd072c5845d39b4699eb65efa827b79a5cf7fecc9f468f8cad2b8540f
pycparser==3.12 --hash=sha256:a076f3f489b39b43ed13563a1dafe42447445bec2e294154ec5c57fcdda4c85e
pydantic-core==2.50.5 --hash=sha256:470bbc2495367f60d3ca849a8039e4c164701d10637e7743f4427d92651bdb6d
pydantic-settings==2.16.3 --hash=sha256:d1db16a2d34006323a1b42c0640898da58adfbad7ec30baaa9e2b18aafc08999
pydantic==2.14.4 --hash=sha256:653a2ad9f6d8858529c77c72717d0ea991d6c6837fe683246b2f4b2bbfc3fadc
pyjwt==2.15.1 --hash=sha256:42d59d631f7768a1028a64c7ff581a9bf7519804daf91fc5b6c56e30eec5e193
python-dotenv==1.2.4 --hash=sha256:42269a8a5b3fd54ffa6f3d84b18abed50064717576b4ecf03dc4a55d8aa04fdc
python-json-logger==4.2.0 --hash=sha256:158a52126fcd6869e09574d2b66272666f3dc8f468c62637ef9a1fa883719cb9
python-multipart==0.0.34 --hash=sha256:ebacd224bd686eee2f9aa1066a657affe07435a185834e05e5235e2e59173e91
pyzmq==27.3.0 --hash=sha256:858fe25231e0fd8612da142efde019faa5ef63fa150a821a27870e791b38c798
referencing==0.37.0 --hash=sha256:381329a9f99628c9069361716891d34ad94af76e461dcb0335825aecc7692231
rich-toolkit==0.20.6 --hash=sha256:465453ba6f94f99401f59f79fb562827ba5f6b4d4759015d40019f5c67750262
rignore==0.8.1 --hash=sha256:2e68cfc4ee0a2909952af2aebd608d1cd22f7d1cdce332cb0b5ea3762939865d
rpds-py==2026.9.1 --hash=sha256:addeda51556dac7c1a2f14cda62db8b621cd12afba3091d03a96c72932387eab
sentry-sdk==2.75.0 --hash=sha256:9a10e97de2cbd42ad7e4a6e02a0d5af19de9811eb02445077d41ba14c08e170c
setproctitle==1.3.8 --hash=sha256:4a765e0c80a2453480be27c4fc22ba1c0771867040c5f91e4221940d78a4abfb
sniffio==1.3.1 --hash=sha256:2f6da418d1f1e0fddd844478f41680e794e6051915791a034ff65e5f100525a2
sse-starlette==3.7.0 --hash=sha256:f1d3136caa12d129284fca3d2ded79bc9af943320b6472712955fea52a6d3eea
starlette==1.10.0 --hash=sha256:478c0ab3b4ced6e82719849c118fa406f0278a3499c1a898cd15cd31bdc38ce4
supervisor==4.3.0 --hash=sha256:0bcb763fddafba410f35cbde226aa7f8514b9fb82eb05a0c85f6588d1c13f8db
torch-c-dlpack-ext==0.1.5 --hash=sha256:e6f9da4bb9af70e27facc777458be62e10dbbbddda7672d16138db0553c5a524
truststore==0.10.5 --hash=sha256:9aaaedaefaf06d8b206278cf8b5012bc897f485a874503501e12d776df78951c
typing-inspection==0.4.5 --hash=sha256:bc210535442b39e1bf2805e0c7a17dfd6a4ace760c84c7f7d16245d23a6b1c39
uvicorn==0.54.0 --hash=sha256:505bdb0f318731d45f1f712071fc781a8981f6847a31c902c9f5e652d4f67faf
watchfiles==1.3.0 --hash=sha256:b5768b49e426fd5b550b012c866db347cdf15c398ef98dc557b6e6b72fa74cd1
websockets==17.4 --hash=sha256:9ae1429ee9e52b139167ed0169757806a27ed7307e942e8c62037a9184e9843b
xgrammar==0.2.7 --hash=sha256:e4397798f73512ab5abccbadf0a7b6aaf0753ccc4f3171c43b14c4d22df1ed28
EOF
}

main "$@"
