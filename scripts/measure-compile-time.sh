#!/usr/bin/env bash
# The compile-time benchmark (issue 10): what fluxion costs a user's build. Compiles each row with
# g++ at -O2 -march=native (the flags the README recommends) and prints the compiler's CPU time
# (user + system), best of three: CPU time rather than wall time, because on a shared machine it
# barely moves with the load. Rows:
#   - the umbrella header alone (header-only, and as a program with prebuilt kernels sees it), then
#     with each facade that is not in it (data, checkpoint, tensorboard, io);
#   - every example;
#   - bench/compile/mlp_train.cpp, a plain MLP training program, and its LibTorch twin
#     bench/compile/mlp_train_torch.cpp (when libtorch-dev is installed), with their ratio;
#   - examples/mnist_models.cpp (issue 11's model layer: conv, pool, LSTM, dense, Adam) against its
#     LibTorch twin bench/compile/mnist_models_torch.cpp, header-only and with both levers;
#   - bench/compile/train_step.cpp: the MLP and CNN of bench/nn trained by a tape and by
#     nn::compile_step (issue 13);
#   - bench/compile/global_pool.cpp: a CNN with nn::global_avg_pool2d, and the same with
#     avg_pool2d + flatten in its place (what the layer costs a program);
#   - bench/compile/sequence_cnn.cpp: a causal, dilated 1-D CNN with nn::conv1d and max_pool1d, and
#     the same depth of conv2d and max_pool2d in their place (stop 58);
#   - bench/compile/ordering.cpp: an MLP step whose loss reads fx::norm, fx::sort and fx::cumsum and
#     whose report reads fx::top_k, and the same step without them (stop 59);
#   - bench/compile/indexing_nd.cpp: an MLP step whose loss picks logits with fx::gather_nd and
#     takes group maxima with fx::unsorted_segment_max, and the same step without them (stop 60);
#   - bench/compile/recurrence.cpp: an MLP step whose loss reads fx::linear_recurrence, fx::cumprod
#     and fx::tensor_scatter_nd_update, and the same step without them (stop 61);
#   - bench/compile/contraction.cpp: an MLP step whose loss reads fx::einsum over three operands and
#     a trace, fx::linear_recurrence from an initial state and fx::gather_nd with batch_dims, and
#     the same step without them (stop 63), and with fx::linalg's trace, band_part and set_diag
#     in their place (stop 81);
#   - bench/compile/recurrent.cpp: Keras's text classifier with nn::gru, then with nn::lstm, each
#     header-only and with prebuilt kernels, the GRU also with the library's GRU set (what each
#     recurrent layer costs a program), then the LSTM with an encoder-decoder beside it
#     (call_with_state: what initial_state and return_state cost), and after an
#     embedding<...>::mask_zero (what Keras's mask costs), and as a tagger whose mask reaches a
#     masked per-step loss (output_and_mask); and with nn::simple_rnn (stop 84), header-only and
#     with prebuilt kernels;
#   - bench/compile/decoder.cpp: an autoencoder whose decoder has nn::upsampling2d, zero_padding2d,
#     cropping2d and conv2d_transpose, then the same with conv2d in their place;
#   - bench/compile/mobilenet.cpp: a MobileNet-style CNN with nn::depthwise_conv2d and
#     nn::separable_conv2d, then with conv2d in their place, each header-only and with prebuilt
#     kernels (stop 67);
#   - bench/compile/attention.cpp: a Transformer-style classifier with nn::multi_head_attention, then
#     without it, each header-only and with prebuilt kernels;
#   - bench/compile/fit_program.cpp, a user's first program with the model layer (fit, evaluate,
#     a checkpoint): header-only, without the checkpoint, at -O3, with prebuilt kernels (with and
#     without the GRU's declarations, which fluxion_target_prebuilt_kernels adds by default);
#     and with a top-3 metric and early stopping on it (-DFIT_PROGRAM_METRICS, stop 57), header-only
#     and with prebuilt kernels, and with a mean IoU besides (-DFIT_PROGRAM_IOU, stop 58) with
#     prebuilt kernels; with a he_normal kernel and an l2 regularizer (-DFIT_PROGRAM_REGULARIZED,
#     stop 74), header-only and with prebuilt kernels; with an nn::activity_regularization after the
#     hidden layer (-DFIT_PROGRAM_ACTIVITY, stop 83), header-only and with prebuilt kernels;
#   - bench/compile/newcomer_gru.cpp, the program a newcomer writes with a GRU (stop 53):
#     header-only, with prebuilt kernels alone (NO_GRU) and with the GRU's set;
#   - the README's "Gradients" program (stop 54), at derivative order 2 as written and at 1;
#   - mlp_train.cpp again with each of the levers the README documents: fluxion's kernels
#     prebuilt (FLUXION_PREBUILT_KERNELS, the fluxion::kernels target) and a precompiled header;
#     every example with both;
#   - issue 10's baseline, c8d8090 (when the checkout has it): its umbrella header and examples,
#     and mlp_train.cpp against its headers, with today's rows divided by them.
#   scripts/measure-compile-time.sh [extra compiler flags...]
#   FLUXION_COMPILE_RUNS=1 scripts/measure-compile-time.sh     (one run per row instead of three)
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

./scripts/install-deps.sh --bench
cxx=${CXX:-g++}
flags=(-std=c++20 -O2 -march=native -Iinclude "$@")
# <fluxion/distributed.hpp> and its example need <mpi.h>: the include directories of the MPI
# compiler wrapper (only -I: the other rows compile as they always did).
if command -v mpicxx >/dev/null; then
  for flag in $(mpicxx --showme:compile 2>/dev/null || mpicxx -compile-info 2>/dev/null | cut -d' ' -f2-); do
    [[ "$flag" == -I* ]] && flags+=("$flag")
  done
fi
runs=${FLUXION_COMPILE_RUNS:-3}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# cpu_seconds <command...>: the command's CPU time (user + system) in seconds.
cpu_seconds() {
  local t
  if ! t=$( { TIMEFORMAT='%U %S'; time "$@" >/dev/null 2>"$scratch/err"; } 2>&1 ); then
    cat "$scratch/err" >&2
    echo "measure-compile-time.sh: the compile failed: $*" >&2
    exit 1
  fi
  awk '{ printf "%.2f", $1 + $2 }' <<<"$(tail -n 1 <<<"$t")"
}

# best <command...>: the best CPU time of $runs runs.
best() {
  local b="" t
  for ((i = 0; i < runs; ++i)); do
    t=$(cpu_seconds "$@")
    if [[ -z "$b" ]] || awk -v a="$t" -v b="$b" 'BEGIN { exit !(a < b) }'; then b=$t; fi
  done
  echo "$b"
}

row() { printf '%-58s %7s s\n' "$1" "$2"; }
ratio_of() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

printf '#include <fluxion/fluxion.hpp>\nint main() { return 0; }\n' > "$scratch/umbrella.cpp"
echo "$cxx $($cxx -dumpfullversion), flags: ${flags[*]}; CPU seconds, best of $runs"
row "#include <fluxion/fluxion.hpp>" "$(best "$cxx" "${flags[@]}" -c "$scratch/umbrella.cpp" -o "$scratch/out.o")"
# The same in a program with prebuilt kernels: the non-template code it links is only declared.
row "  ... with FLUXION_PREBUILT_KERNELS" \
    "$(best "$cxx" "${flags[@]}" -DFLUXION_PREBUILT_KERNELS -c "$scratch/umbrella.cpp" -o "$scratch/out.o")"
# The facades outside the umbrella, each with it (what a program that uses them includes).
for facade in data checkpoint tensorboard io distributed; do
  printf '#include <fluxion/fluxion.hpp>\n#include <fluxion/%s.hpp>\nint main() { return 0; }\n' "$facade" > "$scratch/facade.cpp"
  row "  ... + <fluxion/$facade.hpp>" "$(best "$cxx" "${flags[@]}" -c "$scratch/facade.cpp" -o "$scratch/out.o")"
done
# Both levers for the examples, as a program gets them from CMake: FLUXION_PREBUILT_KERNELS and a
# precompiled header of exactly the fluxion headers the example includes (what
# fluxion_target_precompile_headers(app data checkpoint tensorboard) makes; a bigger header costs
# a small program up to a second more to load). -Werror=invalid-pch: a header that g++ could not
# use would otherwise be parsed silently, and the row would measure nothing.
# pch_for <source>: builds (once per set of headers) and prints the directory of its header.
pch_for() {
  local headers key dir
  headers=$(grep -o '^#include <fluxion/[a-z_]*\.hpp>' "$1" | grep -v 'fluxion/cuda\.hpp' | sort -u |
            awk '/fluxion\.hpp/ { print; next } { rest = rest $0 "\n" } END { printf "%s", rest }')
  key=$(md5sum <<<"$headers" | cut -c1-12)
  dir="$scratch/pch_$key"
  if [[ ! -e "$dir/fluxion_pch.hpp.gch" ]]; then
    mkdir -p "$dir"
    printf '%s\n' "$headers" > "$dir/fluxion_pch.hpp"
    "$cxx" "${flags[@]}" -DFLUXION_PREBUILT_KERNELS -x c++-header "$dir/fluxion_pch.hpp" -o "$dir/fluxion_pch.hpp.gch"
  fi
  echo "$dir"
}
# with_levers <source>: its best CPU time with both levers.
with_levers() {
  local pch
  pch=$(pch_for "$1")
  best "$cxx" "${flags[@]}" -DFLUXION_PREBUILT_KERNELS -Winvalid-pch -Werror=invalid-pch -I"$pch" \
    -include fluxion_pch.hpp -c "$1" -o "$scratch/out.o"
}
models=""
declare -A example_time example_levers
for example in examples/*.cpp; do
  t=$(best "$cxx" "${flags[@]}" -c "$example" -o "$scratch/out.o")
  l=$(with_levers "$example")
  row "$example" "$t"
  row "  ... with both levers" "$l"
  example_time[$example]=$t example_levers[$example]=$l
  [[ "$example" == examples/mnist_models.cpp ]] && models=$t
done

# The README's "Gradients" program (stop 54), extracted as cmake/examples.cmake extracts it, at
# FLUXION_MAX_DERIVATIVE_ORDER 2 as written, and at the default order 1 (its second derivative
# would then throw at run time; the compile is what is measured).
awk '/^## Gradients$/ {h = 1} h && /^```cpp$/ {c = 1; next} c && /^```$/ {exit} c {print}' README.md \
  > "$scratch/readme_gradients.cpp"
sed 's/^#define FLUXION_MAX_DERIVATIVE_ORDER 2.*$//' "$scratch/readme_gradients.cpp" > "$scratch/readme_gradients_1.cpp"
row "README.md's Gradients program (derivative order 2)" \
  "$(best "$cxx" "${flags[@]}" -c "$scratch/readme_gradients.cpp" -o "$scratch/out.o")"
row "  ... at derivative order 1" "$(best "$cxx" "${flags[@]}" -c "$scratch/readme_gradients_1.cpp" -o "$scratch/out.o")"
row "  ... order 2 / order 1 with FLUXION_PREBUILT_KERNELS" \
  "$(best "$cxx" "${flags[@]}" -DFLUXION_PREBUILT_KERNELS -c "$scratch/readme_gradients.cpp" -o "$scratch/out.o") / $(best "$cxx" "${flags[@]}" -DFLUXION_PREBUILT_KERNELS -c "$scratch/readme_gradients_1.cpp" -o "$scratch/out.o")"

mlp=$(best "$cxx" "${flags[@]}" -c bench/compile/mlp_train.cpp -o "$scratch/out.o")
row "bench/compile/mlp_train.cpp" "$mlp"

# Lever 1: the kernels prebuilt once (src/kernels.cpp, what the fluxion::kernels target compiles).
prebuilt=$(best "$cxx" "${flags[@]}" -DFLUXION_PREBUILT_KERNELS -c bench/compile/mlp_train.cpp -o "$scratch/out.o")
row "  ... with FLUXION_PREBUILT_KERNELS" "$prebuilt"
# Lever 2: a precompiled header of the fluxion headers it includes (fluxion_target_precompile_headers).
both=$(with_levers bench/compile/mlp_train.cpp)
row "  ... with prebuilt kernels and a precompiled header (both levers)" "$both"

# The compiled training step (issue 13) against the same program with a tape.
row "bench/compile/train_step.cpp, tape-based step" \
  "$(best "$cxx" "${flags[@]}" -DFLUXION_COMPILED_STEP=0 -c bench/compile/train_step.cpp -o "$scratch/out.o")"
row "bench/compile/train_step.cpp, nn::compile_step" \
  "$(best "$cxx" "${flags[@]}" -DFLUXION_COMPILED_STEP=1 -c bench/compile/train_step.cpp -o "$scratch/out.o")"

# variant_row <label> <file> <-D flags...>: one row, `file` compiled with the given definitions.
variant_row() {
  local label=$1 file=$2
  shift 2
  row "$label" "$(best "$cxx" "${flags[@]}" "$@" -c "$file" -o "$scratch/out.o")"
}

# A global pooling layer against the same reduction written with the older layers.
variant_row "bench/compile/global_pool.cpp, nn::global_avg_pool2d" bench/compile/global_pool.cpp -DFLUXION_GLOBAL_POOL=1
variant_row "bench/compile/global_pool.cpp, avg_pool2d<7> + flatten instead" bench/compile/global_pool.cpp \
  -DFLUXION_GLOBAL_POOL=0

# conv1d and the 1-D pools (stop 58) against the same depth of conv2d and 2-D pooling.
variant_row "bench/compile/sequence_cnn.cpp, nn::conv1d (causal, dilated) and max_pool1d" bench/compile/sequence_cnn.cpp \
  -DFLUXION_CONV1D=1
variant_row "bench/compile/sequence_cnn.cpp, conv2d and max_pool2d instead" bench/compile/sequence_cnn.cpp -DFLUXION_CONV1D=0

# norm, sort, cumsum and top_k in a training step and its report (stop 59) against the same step
# with reduce_sum(square) and argmax.
variant_row "bench/compile/ordering.cpp, norm, sort, cumsum and top_k" bench/compile/ordering.cpp -DFLUXION_ORDERING=1
variant_row "bench/compile/ordering.cpp, reduce_sum(square) and argmax instead" bench/compile/ordering.cpp -DFLUXION_ORDERING=0

# gather_nd and unsorted_segment_max in a training step's loss (stop 60) against the step without them.
variant_row "bench/compile/indexing_nd.cpp, gather_nd and unsorted_segment_max" bench/compile/indexing_nd.cpp -DFLUXION_INDEXING_ND=1
variant_row "bench/compile/indexing_nd.cpp, without them" bench/compile/indexing_nd.cpp -DFLUXION_INDEXING_ND=0

# linear_recurrence, cumprod and tensor_scatter_nd_update in a training step's loss (stop 61) against
# the step without them.
variant_row "bench/compile/recurrence.cpp, linear_recurrence, cumprod, tensor_scatter_nd_update" bench/compile/recurrence.cpp \
  -DFLUXION_RECURRENCE=1
variant_row "bench/compile/recurrence.cpp, without them" bench/compile/recurrence.cpp -DFLUXION_RECURRENCE=0

# einsum over three operands and with a trace, linear_recurrence from an initial state and gather_nd
# with batch_dims in a training step's loss (stop 63) against the step without them.
variant_row "bench/compile/contraction.cpp, einsum (3 operands, trace), h0, batch_dims" bench/compile/contraction.cpp \
  -DFLUXION_CONTRACTION=1
variant_row "bench/compile/contraction.cpp, without them" bench/compile/contraction.cpp -DFLUXION_CONTRACTION=0
# fx::linalg's trace, band_part and set_diag (stop 81) in the same step, against the row above.
variant_row "bench/compile/contraction.cpp, fx::linalg trace, band_part, set_diag" bench/compile/contraction.cpp \
  -DFLUXION_CONTRACTION=2

# The recurrent layers in a text classifier, header-only and with prebuilt kernels (the GRU's with
# the library's GRU set, FLUXION_PREBUILT_GRU, in by default since stop 53, and without it: NO_GRU).
variant_row "bench/compile/recurrent.cpp, nn::gru" bench/compile/recurrent.cpp -DFLUXION_RECURRENT_GRU=1
variant_row "  ... with FLUXION_PREBUILT_KERNELS alone (NO_GRU)" bench/compile/recurrent.cpp -DFLUXION_RECURRENT_GRU=1 \
  -DFLUXION_PREBUILT_KERNELS
variant_row "  ... with FLUXION_PREBUILT_KERNELS and FLUXION_PREBUILT_GRU (the default)" bench/compile/recurrent.cpp \
  -DFLUXION_RECURRENT_GRU=1 -DFLUXION_PREBUILT_KERNELS -DFLUXION_PREBUILT_GRU
variant_row "bench/compile/recurrent.cpp, nn::lstm" bench/compile/recurrent.cpp -DFLUXION_RECURRENT_GRU=0
variant_row "  ... with FLUXION_PREBUILT_KERNELS" bench/compile/recurrent.cpp -DFLUXION_RECURRENT_GRU=0 \
  -DFLUXION_PREBUILT_KERNELS
# Keras's initial_state and return_state (call_with_state): an LSTM encoder-decoder beside the
# classifier (stop 45).
variant_row "bench/compile/recurrent.cpp, nn::lstm and an encoder-decoder (call_with_state)" \
  bench/compile/recurrent.cpp -DFLUXION_RECURRENT_GRU=0 -DFLUXION_RECURRENT_STATE=1
variant_row "  ... with FLUXION_PREBUILT_KERNELS" bench/compile/recurrent.cpp -DFLUXION_RECURRENT_GRU=0 \
  -DFLUXION_RECURRENT_STATE=1 -DFLUXION_PREBUILT_KERNELS
# Keras's mask (embedding<...>::mask_zero before the LSTM; stop 46).
variant_row "bench/compile/recurrent.cpp, nn::lstm after embedding<...>::mask_zero" bench/compile/recurrent.cpp \
  -DFLUXION_RECURRENT_GRU=0 -DFLUXION_RECURRENT_MASK=1
variant_row "  ... with FLUXION_PREBUILT_KERNELS" bench/compile/recurrent.cpp -DFLUXION_RECURRENT_GRU=0 \
  -DFLUXION_RECURRENT_MASK=1 -DFLUXION_PREBUILT_KERNELS
# A tagger: the mask reaches the output, and a per-step loss leaves the padding out (stop 47).
variant_row "bench/compile/recurrent.cpp, a tagger: the mask to a masked per-step loss" bench/compile/recurrent.cpp \
  -DFLUXION_RECURRENT_GRU=0 -DFLUXION_RECURRENT_TAGGER=1
# Keras's SimpleRNN in the classifier (stop 84): header-only, with prebuilt kernels alone (the
# program compiles its statements), and with the library's SimpleRNN set (SIMPLE_RNN, on request).
variant_row "bench/compile/recurrent.cpp, nn::simple_rnn" bench/compile/recurrent.cpp -DFLUXION_RECURRENT_SIMPLE=1
variant_row "  ... with FLUXION_PREBUILT_KERNELS alone" bench/compile/recurrent.cpp -DFLUXION_RECURRENT_SIMPLE=1 \
  -DFLUXION_PREBUILT_KERNELS
variant_row "  ... with FLUXION_PREBUILT_KERNELS and FLUXION_PREBUILT_SIMPLE_RNN (SIMPLE_RNN)" bench/compile/recurrent.cpp \
  -DFLUXION_RECURRENT_SIMPLE=1 -DFLUXION_PREBUILT_KERNELS -DFLUXION_PREBUILT_SIMPLE_RNN
variant_row "  ... with FLUXION_PREBUILT_KERNELS" bench/compile/recurrent.cpp -DFLUXION_RECURRENT_GRU=0 \
  -DFLUXION_RECURRENT_TAGGER=1 -DFLUXION_PREBUILT_KERNELS

# The decoder layers against conv2d in their place.
variant_row "bench/compile/decoder.cpp, upsampling2d, padding, cropping, conv2d_transpose" bench/compile/decoder.cpp \
  -DFLUXION_DECODER_LAYERS=1
variant_row "bench/compile/decoder.cpp, conv2d in their place" bench/compile/decoder.cpp -DFLUXION_DECODER_LAYERS=0

# Depthwise and separable convolutions (stop 67) against conv2d in their place, header-only and
# with prebuilt kernels.
for depthwise in 1 0; do
  label=$([[ $depthwise == 1 ]] && echo "depthwise_conv2d and separable_conv2d" || echo "conv2d in their place")
  variant_row "bench/compile/mobilenet.cpp, $label" bench/compile/mobilenet.cpp -DFLUXION_DEPTHWISE=$depthwise
  variant_row "  ... with FLUXION_PREBUILT_KERNELS" bench/compile/mobilenet.cpp -DFLUXION_DEPTHWISE=$depthwise \
    -DFLUXION_PREBUILT_KERNELS
done

# Multi-head attention in a small Transformer-style classifier, and the same model without it,
# header-only and with prebuilt kernels.
for attention in 1 0; do
  label=$([[ $attention == 1 ]] && echo "nn::multi_head_attention" || echo "without it")
  variant_row "bench/compile/attention.cpp, $label" bench/compile/attention.cpp -DFLUXION_ATTENTION=$attention
  variant_row "  ... with FLUXION_PREBUILT_KERNELS" bench/compile/attention.cpp -DFLUXION_ATTENTION=$attention \
    -DFLUXION_PREBUILT_KERNELS
done

# Group and instance normalization (stop 76) against batch_norm in their place, header-only and with
# prebuilt kernels.
for group_norm in 1 0; do
  label=$([[ $group_norm == 1 ]] && echo "nn::group_norm and nn::instance_norm" || echo "batch_norm in their place")
  variant_row "bench/compile/group_norm.cpp, $label" bench/compile/group_norm.cpp -DFLUXION_GROUP_NORM=$group_norm
  variant_row "  ... with FLUXION_PREBUILT_KERNELS" bench/compile/group_norm.cpp -DFLUXION_GROUP_NORM=$group_norm \
    -DFLUXION_PREBUILT_KERNELS
done

# The prebuilt library itself, compiled once per build (fluxion_target_prebuilt_kernels).
row "src/kernels.cpp (the prebuilt library: the core, once per build)" "$(best "$cxx" "${flags[@]}" -c src/kernels.cpp -o "$scratch/kernels.o")"
row "src/nn_kernels.cpp (the prebuilt library: the model layer)" "$(best "$cxx" "${flags[@]}" -c src/nn_kernels.cpp -o "$scratch/nn_kernels.o")"
row "src/nn_activation_kernels.cpp (the prebuilt library: more activations)" "$(best "$cxx" "${flags[@]}" -c src/nn_activation_kernels.cpp -o "$scratch/nn_activation_kernels.o")"
row "src/nn_gru_kernels.cpp (the prebuilt library: nn::gru, unless NO_GRU)" "$(best "$cxx" "${flags[@]}" -c src/nn_gru_kernels.cpp -o "$scratch/nn_gru_kernels.o")"
row "src/nn_simple_rnn_kernels.cpp (the prebuilt library: nn::simple_rnn, with SIMPLE_RNN)" "$(best "$cxx" "${flags[@]}" -c src/nn_simple_rnn_kernels.cpp -o "$scratch/nn_simple_rnn_kernels.o")"
row "src/io.cpp (the prebuilt library: checkpoints, summaries)" "$(best "$cxx" "${flags[@]}" -c src/io.cpp -o "$scratch/io.o")"

# The first program a user writes with the model layer (README, "Your own program"): header-only,
# without its checkpoint, at CMake Release's -O3 instead of -O2, and with prebuilt kernels.
fit=(-DFLUXION_HAS_ZLIB=1 -c bench/compile/fit_program.cpp -o "$scratch/out.o")
row "bench/compile/fit_program.cpp (fit, evaluate, a checkpoint)" "$(best "$cxx" "${flags[@]}" "${fit[@]}")"
row "  ... without the checkpoint" "$(best "$cxx" "${flags[@]}" -DFIT_PROGRAM_NO_CHECKPOINT "${fit[@]}")"
row "  ... at -O3 (CMake's Release)" "$(best "$cxx" "${flags[@]}" -O3 "${fit[@]}")"
row "  ... with FLUXION_PREBUILT_KERNELS" "$(best "$cxx" "${flags[@]}" -DFLUXION_PREBUILT_KERNELS "${fit[@]}")"
row "  ... with FLUXION_PREBUILT_KERNELS and FLUXION_PREBUILT_GRU (the default since stop 53; no GRU here)" \
  "$(best "$cxx" "${flags[@]}" -DFLUXION_PREBUILT_KERNELS -DFLUXION_PREBUILT_GRU "${fit[@]}")"
# The same program with a metric and Keras 3's EarlyStopping watching it (stop 57): what using them costs.
row "  ... with a metric and early stopping (FIT_PROGRAM_METRICS)" "$(best "$cxx" "${flags[@]}" -DFIT_PROGRAM_METRICS "${fit[@]}")"
row "  ... with both and FLUXION_PREBUILT_KERNELS" \
  "$(best "$cxx" "${flags[@]}" -DFIT_PROGRAM_METRICS -DFLUXION_PREBUILT_KERNELS "${fit[@]}")"
# And a mean IoU besides (stop 58): what a confusion-matrix metric adds.
row "  ... and a mean IoU (FIT_PROGRAM_IOU), with FLUXION_PREBUILT_KERNELS" \
  "$(best "$cxx" "${flags[@]}" -DFIT_PROGRAM_METRICS -DFIT_PROGRAM_IOU -DFLUXION_PREBUILT_KERNELS "${fit[@]}")"

# Another optimizer than Adam (stop 64: nadam), header-only and with prebuilt kernels (which hold
# Nadam's update too since stop 66, with every other optimizer's).
row "  ... with fx::optim::nadam for Adam (FIT_PROGRAM_OPTIMIZER=nadam)" \
  "$(best "$cxx" "${flags[@]}" -DFIT_PROGRAM_OPTIMIZER=nadam "${fit[@]}")"
row "  ... with fx::optim::nadam and FLUXION_PREBUILT_KERNELS" \
  "$(best "$cxx" "${flags[@]}" -DFIT_PROGRAM_OPTIMIZER=nadam -DFLUXION_PREBUILT_KERNELS "${fit[@]}")"

# Keras's layer options (stop 74): a he_normal kernel and an l2 regularizer on the hidden layer;
# fit compiles the penalty in every program (its value is only computed where a variable has one).
row "  ... with an initializer and a regularizer (FIT_PROGRAM_REGULARIZED)" \
  "$(best "$cxx" "${flags[@]}" -DFIT_PROGRAM_REGULARIZED "${fit[@]}")"
row "  ... with both and FLUXION_PREBUILT_KERNELS" \
  "$(best "$cxx" "${flags[@]}" -DFIT_PROGRAM_REGULARIZED -DFLUXION_PREBUILT_KERNELS "${fit[@]}")"
# Keras's ActivityRegularization after the hidden layer (stop 83): what the penalty on the activity,
# a recorded statement and its backward rule, costs the program.
row "  ... with an activity_regularization (FIT_PROGRAM_ACTIVITY)" \
  "$(best "$cxx" "${flags[@]}" -DFIT_PROGRAM_ACTIVITY "${fit[@]}")"
row "  ... with it and FLUXION_PREBUILT_KERNELS" \
  "$(best "$cxx" "${flags[@]}" -DFIT_PROGRAM_ACTIVITY -DFLUXION_PREBUILT_KERNELS "${fit[@]}")"

# The program a newcomer writes with a GRU (stop 53): header-only, with prebuilt kernels alone
# (NO_GRU) and with the GRU's set (fluxion_target_prebuilt_kernels's default).
newcomer=(-c bench/compile/newcomer_gru.cpp -o "$scratch/out.o")
row "bench/compile/newcomer_gru.cpp (mask_zero, a bidirectional GRU, fit, a checkpoint)" \
  "$(best "$cxx" "${flags[@]}" "${newcomer[@]}")"
row "  ... with FLUXION_PREBUILT_KERNELS alone (NO_GRU)" "$(best "$cxx" "${flags[@]}" -DFLUXION_PREBUILT_KERNELS "${newcomer[@]}")"
row "  ... with FLUXION_PREBUILT_KERNELS and FLUXION_PREBUILT_GRU (the default)" \
  "$(best "$cxx" "${flags[@]}" -DFLUXION_PREBUILT_KERNELS -DFLUXION_PREBUILT_GRU "${newcomer[@]}")"

torch_include=/usr/include/torch/csrc/api/include
if [[ -e "$torch_include/torch/torch.h" ]]; then
  torch=$(best "$cxx" "${flags[@]}" -I"$torch_include" -c bench/compile/mlp_train_torch.cpp -o "$scratch/out.o")
  row "bench/compile/mlp_train_torch.cpp (LibTorch)" "$torch"
  echo "fluxion / LibTorch: $(ratio_of "$mlp" "$torch") header-only, $(ratio_of "$prebuilt" "$torch") with prebuilt kernels," \
       "$(ratio_of "$both" "$torch") with prebuilt kernels and a precompiled header (goal: 0.5)"
  models_prebuilt=$(best "$cxx" "${flags[@]}" -DFLUXION_PREBUILT_KERNELS -c examples/mnist_models.cpp -o "$scratch/out.o")
  row "examples/mnist_models.cpp ... with FLUXION_PREBUILT_KERNELS" "$models_prebuilt"
  models_levers=${example_levers[examples/mnist_models.cpp]}  # measured with the examples
  models_torch=$(best "$cxx" "${flags[@]}" -I"$torch_include" -c bench/compile/mnist_models_torch.cpp -o "$scratch/out.o")
  row "bench/compile/mnist_models_torch.cpp (LibTorch)" "$models_torch"
  echo "mnist_models fluxion / LibTorch: $(ratio_of "$models" "$models_torch") header-only," \
       "$(ratio_of "$models_prebuilt" "$models_torch") with prebuilt kernels," \
       "$(ratio_of "$models_levers" "$models_torch") with both levers (goal: 0.5)"
else
  echo "LibTorch twins: skipped (install libtorch-dev, or run scripts/install-deps.sh --bench)"
fi

# Issue 10's baseline, in the same run: the umbrella header, the three examples of c8d8090 (the
# commit the issue measured) and mlp_train.cpp against c8d8090's headers, header-only as they were
# then; then each row of today against it, header-only and with both levers. Needs the commit
# (a clone of the repository; skipped in an export without history).
baseline=c8d8090
if git cat-file -e "$baseline^{commit}" 2>/dev/null; then
  mkdir -p "$scratch/baseline"
  git archive "$baseline" include examples | tar -x -C "$scratch/baseline"
  bflags=(-std=c++20 -O2 -march=native -I"$scratch/baseline/include" "$@")
  printf '#include <fluxion/fluxion.hpp>\nint main() { return 0; }\n' > "$scratch/baseline/umbrella.cpp"
  row "issue 10's baseline ($baseline): #include <fluxion/fluxion.hpp>" \
      "$(best "$cxx" "${bflags[@]}" -c "$scratch/baseline/umbrella.cpp" -o "$scratch/out.o")"
  for name in eager_basics gradients linear_regression; do
    b=$(best "$cxx" "${bflags[@]}" -c "$scratch/baseline/examples/$name.cpp" -o "$scratch/out.o")
    row "issue 10's baseline ($baseline): examples/$name.cpp" "$b"
    echo "  examples/$name.cpp now / $baseline: $(ratio_of "${example_time[examples/$name.cpp]}" "$b") header-only," \
         "$(ratio_of "${example_levers[examples/$name.cpp]}" "$b") with both levers (goal: 0.5)"
  done
  b=$(best "$cxx" "${bflags[@]}" -c bench/compile/mlp_train.cpp -o "$scratch/out.o")
  row "issue 10's baseline ($baseline): bench/compile/mlp_train.cpp" "$b"
  echo "  bench/compile/mlp_train.cpp now / $baseline: $(ratio_of "$mlp" "$b") header-only," \
       "$(ratio_of "$prebuilt" "$b") with prebuilt kernels, $(ratio_of "$both" "$b") with both levers"
else
  echo "issue 10's baseline rows: skipped (commit $baseline is not in this checkout)"
fi

# The device headers, compiled by nvcc for Hopper as scripts/run-gpu-*.sh build them (issue 14).
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
if [[ -x "$nvcc" ]]; then
  printf '#include <fluxion/cuda.hpp>\n#include <fluxion/optim.hpp>\nint main() { return 0; }\n' > "$scratch/cuda.cu"
  nvcc_flags=(-std=c++20 --extended-lambda --expt-relaxed-constexpr -gencode=arch=compute_90,code=sm_90 -O2 -Iinclude)
  row "#include <fluxion/cuda.hpp> + <fluxion/optim.hpp> (nvcc)" \
      "$(best "$nvcc" "${nvcc_flags[@]}" -c "$scratch/cuda.cu" -o "$scratch/out.o")"
  cudnn=() cudnn_libs=()
  cudnn_flags cudnn cudnn_libs >/dev/null
  if (( ${#cudnn[@]} )); then  # backend/cuda/cudnn.hpp's cost
    row "the same with cuDNN (nvcc, FLUXION_USE_CUDNN=1)" \
        "$(best "$nvcc" "${nvcc_flags[@]}" "${cudnn[@]}" -c "$scratch/cuda.cu" -o "$scratch/out.o")"
  fi
  row "bench/cuda/train.bench.cu (nvcc: the MLP, CNN and CNN+LSTM steps on a GPU)" \
      "$(best "$nvcc" "${nvcc_flags[@]}" -c bench/cuda/train.bench.cu -o "$scratch/out.o")"
  row "examples/fashion_mnist_cnn.cpp (nvcc: --device cuda)" \
      "$(best "$nvcc" "${nvcc_flags[@]}" -x cu -c examples/fashion_mnist_cnn.cpp -o "$scratch/out.o")"
else
  echo "nvcc rows: skipped (no CUDA toolkit)"
fi
