set -u
. tools/device_round_lib.sh
device_round_begin s12k
device_round_step "8 128" fp8 1 270 "^\| (attn.kv_cast|attn.mla) "
device_round_pack
