// The compile cost of the recurrent layers, measured by scripts/measure-compile-time.sh: Keras's
// text classifier (embedding, a recurrent layer of 32 units, dense) with nn::gru
// (FLUXION_RECURRENT_GRU=1, the default) or nn::lstm (0), one tape-based training step on random
// token ids. The rows with and without fluxion's prebuilt kernels show what each layer costs a
// program. FLUXION_RECURRENT_STATE=1 (with FLUXION_RECURRENT_GRU=0) adds Keras's sequence-to-sequence
// pattern: an LSTM encoder's final states (call_with_state) start an LSTM decoder over the same
// embedded ids, whose last step the dense layer reads (what initial_state and return_state cost).
// FLUXION_RECURRENT_MASK=1 makes the classifier's embedding embedding<...>::mask_zero (Keras's
// mask_zero = True: the recurrent layer skips the padding steps; what the mask costs).
// FLUXION_RECURRENT_SIMPLE=1 puts nn::simple_rnn in the classifier instead (stop 84: what Keras's
// SimpleRNN costs a program).
// FLUXION_RECURRENT_TAGGER=1 (with FLUXION_RECURRENT_GRU=0) makes it a tagger instead: mask_zero,
// an LSTM with ReturnSequences and a dense layer per step, whose mask reaches the output
// (output_and_mask) and a per-step loss that leaves the padding out (what a masked loss costs).
#include <cstdio>

#include <fluxion/fluxion.hpp>

#ifndef FLUXION_RECURRENT_GRU
#define FLUXION_RECURRENT_GRU 1
#endif
#ifndef FLUXION_RECURRENT_STATE
#define FLUXION_RECURRENT_STATE 0
#endif
#ifndef FLUXION_RECURRENT_MASK
#define FLUXION_RECURRENT_MASK 0
#endif
#ifndef FLUXION_RECURRENT_SIMPLE
#define FLUXION_RECURRENT_SIMPLE 0
#endif
#ifndef FLUXION_RECURRENT_TAGGER
#define FLUXION_RECURRENT_TAGGER 0
#endif

namespace fx = fluxion;
namespace nn = fluxion::nn;

int main() {
  fx::random::generator gen{1};
#if FLUXION_RECURRENT_SIMPLE
  using recurrent = nn::simple_rnn<32>;
#elif FLUXION_RECURRENT_GRU
  using recurrent = nn::gru<32>;
#else
  using recurrent = nn::lstm<32>;
#endif
#if FLUXION_RECURRENT_MASK
  using embedding = nn::embedding<1000, 16>::mask_zero;
#else
  using embedding = nn::embedding<1000, 16>;
#endif
#if FLUXION_RECURRENT_TAGGER
  auto net = nn::sequential(gen, nn::typed_input<std::int32_t, 20>{}, nn::embedding<1000, 16>::mask_zero{},
                            nn::lstm<32, true>{}, nn::dense<5>{});
#else
  auto net = nn::sequential(gen, nn::typed_input<std::int32_t, 20>{}, embedding{}, recurrent{}, nn::dense<2>{});
#endif
#if FLUXION_RECURRENT_STATE
  struct seq2seq : nn::model<seq2seq> {
    nn::embedding<1000, 16> embed;
    nn::lstm<32> encoder;
    nn::lstm<32, true> decoder;
    nn::dense<2> head;
    FLUXION_LAYERS(embed, encoder, decoder, head)
    fx::tensor<float> call(const fx::tensor<std::int32_t>& ids, bool training = false) {
      const fx::tensor<float> e = embed(ids, training);
      auto [out, h, c] = encoder.call_with_state(e);
      auto [seq, h2, c2] = decoder.call_with_state(e, {h, c});
      return head(h2, training);
    }
  } s2s;
#endif
  fx::optim::adam opt{1e-3};
  const fx::tensor<std::int32_t> x = fx::random::uniform<std::int32_t>({8, 20}, gen, 0, 1000);
  const fx::tensor<std::int32_t> y = fx::random::uniform<std::int32_t>({8}, gen, 0, 2);
#if FLUXION_RECURRENT_TAGGER
  const fx::tensor<std::int32_t> tags = fx::random::uniform<std::int32_t>({8, 20}, gen, 0, 5);
  auto step = [&](auto& model) {
    fx::gradient_tape tape;
    const auto out = model.output_and_mask(x, true);
    fx::tensor<float> loss = fx::losses::sparse_softmax_cross_entropy(out.output, tags, out.mask);
#else
  auto step = [&](auto& model) {
    fx::gradient_tape tape;
    fx::tensor<float> loss = fx::losses::sparse_softmax_cross_entropy(model(x, true), y);
#endif
    auto vars = model.trainable_variables();
    opt.apply_gradients(tape.gradient(loss, vars), vars);
    std::printf("loss %g\n", static_cast<double>(loss.item()));
  };
  step(net);
#if FLUXION_RECURRENT_STATE
  step(s2s);
#endif
}
