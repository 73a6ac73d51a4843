// fx::checkpoint and fx::checkpoint_manager: tensor names, bit-identical continued training after a
// restore (model, Adam and its slots, step, generator), every mismatch and corruption refused with
// everything left unchanged, max_to_keep and latest_checkpoint, and processes killed with SIGKILL
// while saving, after which the previous checkpoint still restores bit-exactly.
#include <fluxion/fluxion.hpp>
#include <fluxion/io.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include "../scratch_dir.hpp"

namespace fx = fluxion;
namespace nn = fluxion::nn;

namespace {


std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

using mlp_t = nn::sequential_t<nn::input<4>, nn::dense<8>, nn::relu, nn::dense<2>>;

mlp_t make_mlp(std::uint64_t seed) {
  fx::random::generator init{seed};
  return nn::sequential(init, nn::input<4>{}, nn::dense<8>{}, nn::relu{}, nn::dense<2>{});
}

/// One training step on data drawn from `data`: the generator's state decides the batch.
template <class Model>
void train_step(Model& net, fx::optim::optimizer& opt, fx::random::generator& data) {
  const fx::tensor<float> x = fx::random::uniform<float>({16, 4}, data);
  const fx::tensor<float> y = fx::random::uniform<float>({16, 2}, data);
  auto vars = net.trainable_variables();
  fx::gradient_tape tape;
  const fx::tensor<float> loss = fx::reduce_mean(fx::square(y - net(x)));
  opt.apply_gradients(tape.gradient(loss, vars), vars);
}

/// Every byte of state: variables, slots, iteration count, the step, the generator.
struct snapshot {
  std::vector<std::pair<std::string, std::vector<float>>> values;
  std::int64_t iterations = 0, step = 0;
  std::uint64_t seed = 0, offset = 0;
  bool operator==(const snapshot&) const = default;
};

template <class Model>
snapshot take_snapshot(Model& net, fx::optim::optimizer& opt, std::int64_t step, const fx::random::generator& gen) {
  snapshot s;
  for (auto* v : net.variables()) s.values.emplace_back(v->name(), v->peek().to_vector());
  for (auto& [name, v] : opt.slot_variables<float, fx::cpu>()) s.values.emplace_back(name, v->peek().to_vector());
  s.iterations = opt.iterations();
  s.step = step;
  s.seed = gen.seed();
  s.offset = gen.offset();
  return s;
}

/// Float vectors compared bit for bit (== on floats would let -0 equal 0).
bool bit_identical(const snapshot& a, const snapshot& b) {
  if (a.values.size() != b.values.size() || a.iterations != b.iterations || a.step != b.step || a.seed != b.seed ||
      a.offset != b.offset)
    return false;
  for (std::size_t i = 0; i < a.values.size(); ++i) {
    const auto& [na, va] = a.values[i];
    const auto& [nb, vb] = b.values[i];
    if (na != nb || va.size() != vb.size() || std::memcmp(va.data(), vb.data(), va.size() * sizeof(float)) != 0)
      return false;
  }
  return true;
}

std::string restore_error(fx::checkpoint& ckpt, const std::string& path, fx::restore_options options = {}) {
  try {
    ckpt.restore(path, options);
  } catch (const fx::io_error& e) {
    return e.what();
  }
  return "(no exception)";
}

}  // namespace

TEST_CASE("checkpoint: tensors are named by object and variable; the optimizer's kind is metadata") {
  scratch_dir dir;
  auto net = make_mlp(1);
  fx::optim::adam opt{1e-2};
  fx::variable<std::int64_t> step{fx::tensor<std::int64_t>(std::int64_t{5})};
  std::int64_t epoch = 2;
  fx::random::generator gen{0xfedcba9876543210ULL};
  gen.skip(11);
  fx::random::generator data{3};
  train_step(net, opt, data);
  fx::checkpoint ckpt{{"model", net}, {"optimizer", opt}, {"step", step}, {"epoch", epoch}, {"rng", gen}};
  const std::string path = ckpt.save(dir.file("ckpt/model"));
  CHECK(path == dir.file("ckpt/model.safetensors"));
  const auto file = fx::io::safetensors::load(path);
  auto names = file.names();
  std::sort(names.begin(), names.end());
  CHECK(names == std::vector<std::string>{"epoch",
                                          "model/dense/bias",
                                          "model/dense/kernel",
                                          "model/dense_1/bias",
                                          "model/dense_1/kernel",
                                          "optimizer/dense/bias/momentum",
                                          "optimizer/dense/bias/velocity",
                                          "optimizer/dense/kernel/momentum",
                                          "optimizer/dense/kernel/velocity",
                                          "optimizer/dense_1/bias/momentum",
                                          "optimizer/dense_1/bias/velocity",
                                          "optimizer/dense_1/kernel/momentum",
                                          "optimizer/dense_1/kernel/velocity",
                                          "optimizer/iterations",
                                          "optimizer/learning_rate",
                                          "rng/offset",
                                          "rng/seed",
                                          "step"});
  CHECK(file.get<float>("model/dense/kernel").to_vector() == net.variables()[0]->peek().to_vector());
  CHECK(file.get<std::int64_t>("optimizer/iterations").to_vector() == std::vector<std::int64_t>{1});
  CHECK(file.get<double>("optimizer/learning_rate").to_vector() == std::vector<double>{0.01});
  CHECK(file.get<std::int64_t>("step").to_vector() == std::vector<std::int64_t>{5});
  CHECK(file.get<std::int64_t>("epoch").to_vector() == std::vector<std::int64_t>{2});
  CHECK(static_cast<std::uint64_t>(file.get<std::int64_t>("rng/seed").to_vector()[0]) == 0xfedcba9876543210ULL);
  CHECK(file.get<std::int64_t>("rng/offset").to_vector() == std::vector<std::int64_t>{11});
  CHECK(file.metadata().at("optimizer/optimizer") == "adam");
  CHECK(file.metadata().at("optimizer/learning_rate") == "0.01");
  CHECK(file.metadata().at("optimizer/beta_2") == "0.999");
  CHECK(!file.metadata().contains("optimizer/clipnorm"));  // clipping is recorded only where it is set
  fx::optim::sgd clipped{{.global_clipnorm = 5.0}};
  const auto clipped_file = fx::io::safetensors::load(fx::checkpoint{{"optimizer", clipped}}.save(dir.file("clipped")));
  CHECK(clipped_file.metadata().at("optimizer/global_clipnorm") == "5");
  CHECK(!clipped_file.metadata().contains("optimizer/clipvalue"));
  // Saved before any training, the optimizer has no slots; restored, it has none either.
  auto fresh = make_mlp(2);
  fx::optim::adam fresh_opt;
  fx::checkpoint{{"model", fresh}, {"optimizer", fresh_opt}}.save(dir.file("untrained"));
  auto other = make_mlp(3);
  fx::optim::adam other_opt;
  fx::checkpoint{{"model", other}, {"optimizer", other_opt}}.restore(dir.file("untrained"));
  CHECK(other_opt.slot_variables<float, fx::cpu>().empty());
  CHECK(other.variables()[0]->peek().to_vector() == fresh.variables()[0]->peek().to_vector());
  // ".safetensors" is not appended twice.
  CHECK(ckpt.save(path) == path);
  CHECK_THROWS_WITH_AS((fx::checkpoint{{"a", epoch}, {"a", step}}), "checkpoint: two objects are named 'a'",
                       fx::invalid_argument);
}

TEST_CASE("checkpoint: a constant learning rate is restored; a schedule is the program's; a bad rate is refused") {
  scratch_dir dir;
  fx::optim::sgd opt{{.learning_rate = 0.1, .momentum = 0.9}};
  opt.set_learning_rate(0.025);  // as reduce_lr_on_plateau sets it
  opt.set_iterations(7);
  const std::string path = fx::checkpoint{{"optimizer", opt}}.save(dir.file("rate"));
  CHECK(fx::io::safetensors::load(path).get<double>("optimizer/learning_rate").to_vector() == std::vector<double>{0.025});

  fx::optim::sgd fresh{{.learning_rate = 0.1, .momentum = 0.9}};
  fx::checkpoint{{"optimizer", fresh}}.restore(path);
  CHECK(fresh.learning_rate() == 0.025);
  CHECK(fresh.learning_rate_schedule().is_constant());
  CHECK(fresh.iterations() == 7);

  // A program with a schedule keeps it: the file's rate is checked and consumed, not set.
  const auto decay = fx::optim::piecewise_constant({5, 10}, {0.5, 0.1, 0.01});
  fx::optim::sgd scheduled{{.learning_rate = decay, .momentum = 0.9}};
  fx::checkpoint{{"optimizer", scheduled}}.restore(path);
  CHECK(!scheduled.learning_rate_schedule().is_constant());
  CHECK(scheduled.iterations() == 7);
  CHECK(scheduled.learning_rate() == 0.1);  // the schedule at step 7

  // A schedule saves no rate, so a constant optimizer restored from it (or from a file saved before
  // stop 57) keeps its own.
  const std::string scheduled_path = fx::checkpoint{{"optimizer", scheduled}}.save(dir.file("scheduled"));
  CHECK(!fx::io::safetensors::load(scheduled_path).contains("optimizer/learning_rate"));
  fx::optim::sgd constant{{.learning_rate = 0.3, .momentum = 0.9}};
  fx::checkpoint{{"optimizer", constant}}.restore(scheduled_path);
  CHECK(constant.learning_rate() == 0.3);
  CHECK(constant.iterations() == 7);

  // A rate that is not finite and non-negative, or not an F64 scalar, is refused and nothing changes.
  for (const double bad : {-0.5, std::numeric_limits<double>::quiet_NaN()}) {
    fx::io::safetensors file;
    file.add("optimizer/iterations", fx::tensor<std::int64_t>(std::int64_t{3}));
    file.add("optimizer/learning_rate", fx::tensor<double>(bad));
    file.save(dir.file("bad.safetensors"));
    fx::optim::sgd target{{.learning_rate = 0.2}};
    fx::checkpoint ckpt{{"optimizer", target}};
    CHECK(restore_error(ckpt, dir.file("bad")) ==
          "checkpoint::restore: '" + dir.file("bad.safetensors") + "': 'optimizer/learning_rate' = " +
              (bad < 0 ? "-0.5" : "nan") + " must be finite and non-negative");
    CHECK(target.learning_rate() == 0.2);
    CHECK(target.iterations() == 0);
  }
  fx::io::safetensors as_float;
  as_float.add("optimizer/iterations", fx::tensor<std::int64_t>(std::int64_t{3}));
  as_float.add("optimizer/learning_rate", fx::tensor<float>(0.5f));
  as_float.save(dir.file("float.safetensors"));
  fx::optim::sgd target{{.learning_rate = 0.2}};
  fx::checkpoint ckpt{{"optimizer", target}};
  CHECK(restore_error(ckpt, dir.file("float")) ==
        "checkpoint::restore: '" + dir.file("float.safetensors") +
            "': 'optimizer/learning_rate' has dtype F32 in the file, F64 (float64) in the optimizer");
  CHECK(target.learning_rate() == 0.2);
}

TEST_CASE("checkpoint: restoring model, Adam, step and generator continues training bit-identically") {
  scratch_dir dir;
  // Run A: 3 steps, save, 2 more steps.
  auto net_a = make_mlp(1);
  fx::optim::adam opt_a{{.learning_rate = 0.05, .amsgrad = true}};
  fx::variable<std::int64_t> step_a{fx::tensor<std::int64_t>(std::int64_t{0})};
  fx::random::generator data_a{7};
  fx::checkpoint ckpt_a{{"model", net_a}, {"optimizer", opt_a}, {"step", step_a}, {"data", data_a}};
  auto advance = [](fx::variable<std::int64_t>& s) { s.assign(fx::tensor<std::int64_t>(s.peek().to_vector()[0] + 1)); };
  for (int i = 0; i < 3; ++i) {
    train_step(net_a, opt_a, data_a);
    advance(step_a);
  }
  const std::string path = ckpt_a.save(dir.file("run"));
  const snapshot at_save = take_snapshot(net_a, opt_a, step_a.peek().to_vector()[0], data_a);
  for (int i = 0; i < 2; ++i) {
    train_step(net_a, opt_a, data_a);
    advance(step_a);
  }
  const snapshot a = take_snapshot(net_a, opt_a, step_a.peek().to_vector()[0], data_a);

  // Run B: a fresh program, other initial weights, an optimizer without slots, another data seed.
  auto net_b = make_mlp(99);
  fx::optim::adam opt_b{{.learning_rate = 0.05, .amsgrad = true}};
  fx::variable<std::int64_t> step_b{fx::tensor<std::int64_t>(std::int64_t{0})};
  fx::random::generator data_b{12345};
  fx::checkpoint ckpt_b{{"model", net_b}, {"optimizer", opt_b}, {"step", step_b}, {"data", data_b}};
  REQUIRE(opt_b.slot_variables<float, fx::cpu>().empty());
  CHECK(ckpt_b.restore(dir.file("run")) == path);
  CHECK(opt_b.slot_variables<float, fx::cpu>().size() == 12);  // 4 variables x (momentum, velocity, velocity_hat)
  CHECK(bit_identical(take_snapshot(net_b, opt_b, step_b.peek().to_vector()[0], data_b), at_save));
  for (int i = 0; i < 2; ++i) {
    train_step(net_b, opt_b, data_b);
    advance(step_b);
  }
  const snapshot b = take_snapshot(net_b, opt_b, step_b.peek().to_vector()[0], data_b);
  CHECK(b.step == 5);
  CHECK(b.iterations == 5);
  CHECK(bit_identical(a, b));
  // The training moved the weights: the comparison is not between two untouched models.
  CHECK(!bit_identical(a, at_save));
}

TEST_CASE("checkpoint: a shape, dtype or name mismatch is named, and nothing changes") {
  scratch_dir dir;
  fx::random::generator init{1};
  auto saved = nn::sequential(init, nn::input<4>{}, nn::dense<8>{}, nn::dense<3>{});
  fx::optim::sgd saved_opt{{.learning_rate = 0.1, .momentum = 0.9}};
  saved_opt.build(saved.trainable_variables());
  std::int64_t saved_step = 9;
  fx::checkpoint{{"model", saved}, {"optimizer", saved_opt}, {"step", saved_step}}.save(dir.file("a"));

  SUBCASE("shape") {
    auto other = nn::sequential(init, nn::input<4>{}, nn::dense<8>{}, nn::dense<6>{});
    fx::optim::sgd opt{{.learning_rate = 0.1, .momentum = 0.9}};
    std::int64_t step = 0;
    std::vector<std::vector<float>> before;
    for (auto* v : other.variables()) before.push_back(v->peek().to_vector());
    fx::checkpoint ckpt{{"model", other}, {"optimizer", opt}, {"step", step}};
    CHECK(restore_error(ckpt, dir.file("a")) == "checkpoint::restore: '" + dir.file("a.safetensors") +
                                                    "': 'model/dense_1/kernel' has shape (8, 3) in the file, (8, 6) "
                                                    "in the model");
    std::vector<std::vector<float>> after;
    for (auto* v : other.variables()) after.push_back(v->peek().to_vector());
    CHECK(before == after);
    CHECK(step == 0);
    CHECK(opt.slot_variables<float, fx::cpu>().empty());
    CHECK(opt.iterations() == 0);
  }
  SUBCASE("dtype") {
    fx::random::generator g{2};
    auto doubles = nn::sequential(g, nn::typed_input<double, 4>{}, nn::dense<8>{}, nn::dense<3>{});
    const auto before = doubles.variables()[0]->peek().to_vector();
    fx::checkpoint ckpt{{"model", doubles}};
    CHECK(restore_error(ckpt, dir.file("a"), {.allow_partial = true}) ==
          "checkpoint::restore: '" + dir.file("a.safetensors") +
              "': 'model/dense/kernel' has dtype F32 in the file, F64 (float64) in the model");
    CHECK(doubles.variables()[0]->peek().to_vector() == before);
  }
  SUBCASE("missing and extra names; allow_partial") {
    auto same = nn::sequential(init, nn::input<4>{}, nn::dense<8>{}, nn::dense<3>{});
    std::int64_t step = 0, extra = 3;
    fx::checkpoint without_optimizer{{"model", same}, {"step", step}};
    const std::string error = restore_error(without_optimizer, dir.file("a"));
    CHECK(error.rfind("checkpoint::restore: '" + dir.file("a.safetensors") + "': the file has a tensor 'optimizer/", 0) == 0);
    CHECK(error.find("that no object of the checkpoint has") != std::string::npos);
    CHECK(step == 0);
    fx::checkpoint with_extra{{"model", same}, {"step", step}, {"extra", extra}};
    CHECK(restore_error(with_extra, dir.file("a"), {.allow_partial = true}) == "(no exception)");
    CHECK(step == 9);
    CHECK(extra == 3);
    CHECK(same.variables()[2]->peek().to_vector() == saved.variables()[2]->peek().to_vector());
    step = 0;
    CHECK(restore_error(with_extra, dir.file("a")) ==
          "checkpoint::restore: '" + dir.file("a.safetensors") +
              "': 'extra' is missing from the file (the program (a std::int64_t) has it; pass "
              "restore_options{.allow_partial = true} to restore what the file has)");
    CHECK(step == 0);
  }
  SUBCASE("another kind of optimizer") {
    auto same = nn::sequential(init, nn::input<4>{}, nn::dense<8>{}, nn::dense<3>{});
    fx::optim::adam opt;
    std::int64_t step = 0;
    fx::checkpoint ckpt{{"model", same}, {"optimizer", opt}, {"step", step}};
    CHECK(restore_error(ckpt, dir.file("a")) == "checkpoint::restore: '" + dir.file("a.safetensors") +
                                                    "': 'optimizer' is an optimizer of kind sgd in the file, adam in "
                                                    "the program");
    CHECK(opt.slot_variables<float, fx::cpu>().empty());
  }
  SUBCASE("an unbuilt layer") {
    fx::checkpoint{{"model", saved}}.save(dir.file("m"));
    nn::dense<3> layer;
    fx::checkpoint ckpt{{"model", layer}};
    const std::string error = restore_error(ckpt, dir.file("m"), {});
    INFO(error);
    CHECK(error.find("is model 'model' built? layers create their variables on their first call") != std::string::npos);
  }
}

TEST_CASE("checkpoint: one optimizer over two models whose layers share names: slots named by object, restored to their variables") {
  scratch_dir dir;
  auto make = [](std::uint64_t seed) {
    fx::random::generator init{seed};
    auto encoder = nn::sequential(init, nn::input<4>{}, nn::dense<3>{});
    auto decoder = nn::sequential(init, nn::input<3>{}, nn::dense<4>{});  // its variables: dense/kernel, dense/bias too
    return std::pair{std::move(encoder), std::move(decoder)};
  };
  auto both = [](auto& a, auto& b) {
    auto vars = a.trainable_variables();
    for (auto* v : b.trainable_variables()) vars.push_back(v);
    return vars;
  };
  auto [encoder, decoder] = make(1);
  fx::optim::adam opt{0.1};
  // Two steps of a loss that gives each variable its own gradients, so that each slot differs.
  const fx::tensor<float> x = fx::from_vector(std::vector<float>{1, -2, 3, 0.5f, 2, 1, -1, 0}, {2, 4});
  for (int step = 0; step < 2; ++step) {
    fx::gradient_tape tape;
    fx::tensor<float> loss = fx::reduce_sum(fx::square(decoder(encoder(x)) - 1.f));
    auto vars = both(encoder, decoder);
    opt.apply_gradients(tape.gradient(loss, vars), vars);
  }
  fx::checkpoint ckpt{{"encoder", encoder}, {"decoder", decoder}, {"optimizer", opt}};
  ckpt.save(dir.file("c"));
  const auto file = fx::io::safetensors::load(dir.file("c.safetensors"));
  CHECK(file.contains("optimizer/encoder/dense/kernel/momentum"));
  CHECK(file.contains("optimizer/decoder/dense/bias/velocity"));
  CHECK_FALSE(file.contains("optimizer/dense/kernel/momentum"));
  CHECK(file.contains("encoder/dense/kernel"));  // the models' own names are unchanged

  // A fresh program: its optimizer's slots are created from the file, each for its own variable.
  auto [encoder2, decoder2] = make(2);
  fx::optim::adam opt2{0.1};
  fx::checkpoint ckpt2{{"encoder", encoder2}, {"decoder", decoder2}, {"optimizer", opt2}};
  ckpt2.restore(dir.file("c"));
  for (auto [a_, b] : {std::pair{encoder.trainable_variables(), encoder2.trainable_variables()},
                       std::pair{decoder.trainable_variables(), decoder2.trainable_variables()}}) {
    const auto& a = a_;  // clang 14 cannot capture a structured binding (CAPTURE)
    for (std::size_t i = 0; i < a.size(); ++i) {
      CAPTURE(a[i]->name());
      CHECK(b[i]->peek().to_vector() == a[i]->peek().to_vector());
      for (const char* slot : {"momentum", "velocity"})
        CHECK(opt2.get_slot(*b[i], slot)->peek().to_vector() == opt.get_slot(*a[i], slot)->peek().to_vector());
    }
  }
  CHECK(opt2.get_slot(*encoder2.trainable_variables()[0], "momentum")->peek().to_vector() !=
        opt2.get_slot(*decoder2.trainable_variables()[0], "momentum")->peek().to_vector());
  // And into the same optimizer, whose slots exist: each gets its own values back.
  const auto saved = opt.get_slot(*decoder.trainable_variables()[1], "velocity")->peek().to_vector();
  opt.get_slot(*decoder.trainable_variables()[1], "velocity")->assign(fx::zeros<float>({4}));
  ckpt.restore(dir.file("c"));
  CHECK(opt.get_slot(*decoder.trainable_variables()[1], "velocity")->peek().to_vector() == saved);

  // A checkpoint without the decoder cannot tell the two apart: refused before anything is written.
  fx::checkpoint partial{{"encoder", encoder}, {"optimizer", opt}};
  CHECK_THROWS_WITH_AS(partial.save(dir.file("p")),
                       "checkpoint::save: optimizer 'optimizer' trains two variables named 'dense/kernel', so both "
                       "would save a slot named 'optimizer/dense/kernel/momentum'; add the model the other belongs "
                       "to to the checkpoint (the slots of variables that share a name are then named by their "
                       "objects: 'optimizer/<object>/dense/kernel/momentum'), or name its layers "
                       "(nn::dense<10>{\"encoder_dense\"})",
                       fx::invalid_argument);
  CHECK_FALSE(std::ifstream(dir.file("p.safetensors")).good());
}

TEST_CASE("checkpoint: a truncated or corrupted file is refused and the objects keep their values") {
  scratch_dir dir;
  auto net = make_mlp(4);
  fx::optim::adam opt{1e-2};
  std::int64_t step = 3;
  fx::random::generator data{8};
  train_step(net, opt, data);
  fx::checkpoint ckpt{{"model", net}, {"optimizer", opt}, {"step", step}, {"data", data}};
  const std::string path = ckpt.save(dir.file("good"));
  const std::string good = read_bytes(path);

  // The objects now hold other values; no refused file may change them.
  train_step(net, opt, data);
  step = 4;
  const snapshot before = take_snapshot(net, opt, step, data);
  std::uint64_t header = 0;
  for (int i = 7; i >= 0; --i) header = (header << 8) | static_cast<unsigned char>(good[static_cast<std::size_t>(i)]);

  std::vector<std::pair<std::string, std::string>> corruptions;  // bytes, expected part of the message
  for (std::size_t cut : {std::size_t{5}, std::size_t{8} + header / 2, std::size_t{8} + header + 10, good.size() - 1})
    corruptions.emplace_back(good.substr(0, cut), cut < 8 ? "truncated file" : cut < 8 + header ? "the header length says" : "reach past the end of the data");
  std::string flipped = good;
  flipped[3] = static_cast<char>(flipped[3] ^ 0x40);
  corruptions.emplace_back(flipped, "the header length says");
  std::string bad_json = good;
  bad_json[8 + header / 2] = '\x01';
  corruptions.emplace_back(bad_json, "malformed JSON header");
  std::string overlap = good;
  // The second tensor's data_offsets start 4 bytes earlier: it overlaps the first.
  const std::size_t at = overlap.find("\"data_offsets\":[", overlap.find("\"data_offsets\":[0,") + 1);
  REQUIRE(at < 8 + header);
  const std::size_t digits = at + std::strlen("\"data_offsets\":[");
  const std::size_t comma = overlap.find(',', digits);
  const std::int64_t begin = std::stoll(overlap.substr(digits, comma - digits));
  const std::size_t close = overlap.find(']', comma);
  const std::int64_t end = std::stoll(overlap.substr(comma + 1, close - comma - 1));
  std::string replaced = std::to_string(begin - 4) + "," + std::to_string(end - 4);
  replaced.resize(close - digits, ' ');  // the header keeps its length (JSON allows the spaces)
  overlap.replace(digits, close - digits, replaced);
  corruptions.emplace_back(overlap, "overlap");
  std::string wrong_size = good;
  const std::size_t dtype = wrong_size.find("\"dtype\":\"F32\"");
  wrong_size.replace(dtype, 13, "\"dtype\":\"I64\"");
  corruptions.emplace_back(wrong_size, "of I64 needs");

  for (const auto& [bytes, what_] : corruptions) {
    const auto& what = what_;  // clang 14 cannot capture a structured binding (CAPTURE)
    CAPTURE(what);
    const std::string bad = dir.file("bad.safetensors");
    write_bytes(bad, bytes);
    const std::string message = restore_error(ckpt, bad);
    CHECK(message.rfind("checkpoint::restore: '" + bad + "': ", 0) == 0);
    CHECK(message.find(what) != std::string::npos);
    CHECK(bit_identical(take_snapshot(net, opt, step, data), before));
  }
  // The good file still restores.
  CHECK(restore_error(ckpt, path) == "(no exception)");
  CHECK(step == 3);
  CHECK(opt.iterations() == 1);
}

TEST_CASE("checkpoint_manager: keeps max_to_keep files; latest_checkpoint goes by step number") {
  scratch_dir dir;
  std::int64_t counter = 0;
  fx::checkpoint ckpt{{"counter", counter}};
  fx::checkpoint_manager manager{ckpt, dir.file("run"), {.max_to_keep = 3, .prefix = "ckpt"}};
  CHECK(!manager.latest());
  CHECK(!fx::latest_checkpoint(dir.file("run")));
  CHECK(!fx::latest_checkpoint(dir.file("absent")));
  for (std::int64_t s : {1, 2, 8, 9, 10, 11}) {
    counter = s * 100;
    CHECK(manager.save(s) == dir.file("run/ckpt-" + std::to_string(s) + ".safetensors"));
  }
  std::vector<std::int64_t> kept;
  for (const auto& [s, path] : manager.checkpoints()) kept.push_back(s);
  CHECK(kept == std::vector<std::int64_t>{9, 10, 11});  // 11 > 9 though "ckpt-11" < "ckpt-9" as text
  // Neither modification times nor files of other shapes matter.
  std::filesystem::last_write_time(dir.file("run/ckpt-9.safetensors"),
                                   std::filesystem::file_time_type::clock::now() + std::chrono::hours(1));
  for (const char* other : {"ckpt-99.safetensors.tmp-1-2", ".ckpt-99.safetensors.tmp-1-2", "ckpt-x.safetensors",
                            "ckpt-.safetensors", "notes.txt", "ckpt-12.npy"})
    write_bytes(dir.file(std::string("run/") + other), "junk");
  write_bytes(dir.file("run/other-50.safetensors"), read_bytes(dir.file("run/ckpt-9.safetensors")));
  CHECK(fx::latest_checkpoint(dir.file("run"), "ckpt") == dir.file("run/ckpt-11.safetensors"));
  CHECK(manager.latest() == dir.file("run/ckpt-11.safetensors"));
  CHECK(fx::latest_checkpoint(dir.file("run")) == dir.file("run/other-50.safetensors"));  // any prefix
  counter = 0;
  CHECK(manager.restore_latest() == dir.file("run/ckpt-11.safetensors"));
  CHECK(counter == 1100);
  // TensorFlow's ckpt.restore(manager.latest_checkpoint): the optional path as it comes, restored
  // when there is one, nothing changed when there is none; a string literal is still a path.
  counter = 0;
  CHECK(ckpt.restore(manager.latest()) == dir.file("run/ckpt-11.safetensors"));
  CHECK(counter == 1100);
  counter = 7;
  CHECK(!ckpt.restore(fx::latest_checkpoint(dir.file("absent"))));
  CHECK(counter == 7);
  CHECK(ckpt.restore(dir.file("run/ckpt-10").c_str()) == dir.file("run/ckpt-10.safetensors"));
  CHECK(counter == 1000);
  // A save keeps the file it just wrote, even with a lower step than those kept.
  manager.save(4);
  CHECK(std::filesystem::exists(dir.file("run/ckpt-4.safetensors")));
  CHECK(manager.checkpoints().size() == 3);
  CHECK_THROWS_AS((fx::checkpoint_manager{ckpt, dir.file("run"), {.max_to_keep = -1}}), fx::invalid_argument);
  // TensorFlow's positional max_to_keep: the same manager.
  fx::checkpoint_manager positional{ckpt, dir.file("positional"), 2};
  for (std::int64_t s : {1, 2, 3}) positional.save(s);
  CHECK(positional.checkpoints().size() == 2);
  CHECK(positional.latest() == dir.file("positional/ckpt-3.safetensors"));
  CHECK_THROWS_WITH_AS((fx::checkpoint_manager{ckpt, dir.file("run"), -1}),
                       "checkpoint_manager: max_to_keep = -1 must be non-negative (0 keeps every checkpoint)",
                       fx::invalid_argument);
}

namespace {

/// The deterministic state the crash test's child writes at step k.
void fill_state(mlp_t& net, fx::optim::optimizer& opt, std::int64_t& step, std::int64_t k) {
  float salt = 0;
  auto fill = [&](fx::variable<float>& v) {
    fx::tensor<float> t(v.shape());
    float* p = t.mutable_data();
    for (fx::index_t i = 0; i < t.size(); ++i) p[i] = static_cast<float>(k) + salt + static_cast<float>(i) * 1e-3f;
    v.assign(t);
    salt += 0.5f;
  };
  for (auto* v : net.variables()) fill(*v);
  for (auto& [name, v] : opt.slot_variables<float, fx::cpu>()) fill(*v);
  opt.set_iterations(k);
  step = k;
}

}  // namespace

TEST_CASE("checkpoint: SIGKILL while saving never leaves a partial checkpoint; the previous one restores exactly") {
  scratch_dir dir;
  auto net = make_mlp(5);
  fx::optim::adam opt;
  opt.build(net.trainable_variables());
  std::int64_t step = 0;
  const std::string run = dir.file("run");
  fill_state(net, opt, step, 0);

  // Eight 256x512 variables (4 MB) next to the model make each save long enough to be killed midway.
  std::vector<fx::variable<float>> ballast;
  ballast.reserve(8);
  for (int i = 0; i < 8; ++i) ballast.emplace_back(fx::zeros<float>({256, 512}), "ballast_" + std::to_string(i));
  fx::checkpoint big{{"model", net}, {"optimizer", opt}, {"step", step}, {"b0", ballast[0]}, {"b1", ballast[1]},
                     {"b2", ballast[2]}, {"b3", ballast[3]}, {"b4", ballast[4]}, {"b5", ballast[5]}, {"b6", ballast[6]},
                     {"b7", ballast[7]}};
  fx::checkpoint_manager big_manager{big, run, {.max_to_keep = 2}};
  auto fill_ballast = [&](std::int64_t k) {
    for (auto& b : ballast) {
      fx::tensor<float> t(b.shape());
      std::fill(t.mutable_data(), t.mutable_data() + t.size(), static_cast<float>(k));
      b.assign(t);
    }
  };
  fill_ballast(0);
  big_manager.save(0);

  std::mt19937 rng(20240601);
  int interrupted = 0;
  std::int64_t highest = 0;
  for (int round = 0; round < 20; ++round) {
    CAPTURE(round);
    const auto latest_before = fx::latest_checkpoint(run);
    REQUIRE(latest_before);
    const std::int64_t first = fx::list_checkpoints(run).back().first + 1;
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      for (std::int64_t k = first; k < first + 100000; ++k) {
        fill_state(net, opt, step, k);
        fill_ballast(k);
        big_manager.save(k);
      }
      ::_exit(0);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(std::uniform_int_distribution<int>(2000, 60000)(rng)));
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    CHECK(WIFSIGNALED(status));

    for (const auto& entry : std::filesystem::directory_iterator(run))
      if (entry.path().filename().string().find(".tmp-") != std::string::npos) {
        ++interrupted;
        std::filesystem::remove(entry.path());  // a leftover of the killed save
        break;
      }
    // Every file that looks like a checkpoint is complete and valid.
    const auto all = fx::list_checkpoints(run);
    REQUIRE(!all.empty());
    for (const auto& [k, path_] : all) {
      const auto& path = path_;  // clang 14 cannot capture a structured binding (CAPTURE)
      CAPTURE(path);
      CHECK_NOTHROW(fx::io::safetensors::load(path));
    }
    // The latest restores bit-exactly into objects that held other values.
    const std::int64_t k = all.back().first;
    CHECK(k >= first - 1);
    fill_state(net, opt, step, 999999);
    fill_ballast(999999);
    REQUIRE(big_manager.restore_latest() == all.back().second);
    auto expected_net = make_mlp(5);
    fx::optim::adam expected_opt;
    expected_opt.build(expected_net.trainable_variables());
    std::int64_t expected_step = 0;
    fill_state(expected_net, expected_opt, expected_step, k);
    CHECK(step == k);
    CHECK(opt.iterations() == k);
    CHECK(bit_identical(take_snapshot(net, opt, step, fx::random::generator{0}),
                        take_snapshot(expected_net, expected_opt, expected_step, fx::random::generator{0})));
    bool ballast_ok = true;
    for (auto& b : ballast) {
      const float* p = b.peek().data();
      for (fx::index_t i = 0; i < b.size(); ++i) ballast_ok = ballast_ok && p[i] == static_cast<float>(k);
    }
    CHECK(ballast_ok);
    highest = k;
  }
  MESSAGE("crash test: 20 kills, " << interrupted << " in the middle of writing a temporary file; reached step "
                                   << highest);
  CHECK(highest > 0);  // the children made progress, so kills landed between and during saves
}

TEST_CASE("checkpoint: a callback's state (checkpoint_state) is saved by name, checked, and restored") {
  scratch_dir dir;
  fx::optim::sgd opt{0.1};
  // Counts as a run left them: the best accuracy 0.75 (kept negated, as a loss), waits, a cooldown.
  fx::reduce_lr_on_plateau plateau{opt, {.patience = 3, .cooldown = 2, .monitor = fx::monitor::val_accuracy}};
  fx::early_stopping stop{{.patience = 4}};
  fx::checkpoint ckpt{{"plateau", plateau}, {"stop", stop}};
  CHECK(ckpt.objects()[0].kind() == "state");
  {
    auto state = plateau.checkpoint_state();
    *state.reals[0].value = -0.75;
    *state.integers[0].value = 2;  // wait
    *state.integers[1].value = 1;  // cooldown
    *state.integers[2].value = 3;  // reductions
    auto s = stop.checkpoint_state();
    *s.reals[0].value = 0.125;
    *s.integers[0].value = 1;
    *s.integers[1].value = 5;  // best epoch
  }
  CHECK(plateau.reductions() == 3);
  CHECK(stop.best() == 0.125);
  const std::string path = ckpt.save(dir.file("state"));
  // In the file: the values as the user reads them (the accuracy itself), the monitors as metadata.
  const auto file = fx::io::safetensors::load(path);
  CHECK(file.get<double>("plateau/best").to_vector() == std::vector<double>{0.75});
  CHECK(file.get<std::int64_t>("plateau/wait").to_vector() == std::vector<std::int64_t>{2});
  CHECK(file.get<std::int64_t>("plateau/cooldown").to_vector() == std::vector<std::int64_t>{1});
  CHECK(file.get<std::int64_t>("stop/best_epoch").to_vector() == std::vector<std::int64_t>{5});
  CHECK(*file.find_metadata("plateau/monitor") == "val_accuracy (max)");
  CHECK(*file.find_metadata("stop/monitor") == "automatic (min)");

  // Restored into fresh callbacks (a new process), value for value.
  fx::optim::sgd opt2{0.1};
  fx::reduce_lr_on_plateau plateau2{opt2, {.patience = 5, .cooldown = 2, .monitor = fx::monitor::val_accuracy}};
  fx::early_stopping stop2{{.patience = 4}};
  fx::checkpoint ckpt2{{"plateau", plateau2}, {"stop", stop2}};
  ckpt2.restore(path);
  CHECK(plateau2.reductions() == 3);
  CHECK(*plateau2.checkpoint_state().reals[0].value == -0.75);
  CHECK(*plateau2.checkpoint_state().integers[0].value == 2);
  CHECK(*plateau2.checkpoint_state().integers[1].value == 1);
  CHECK(stop2.best() == 0.125);
  CHECK(stop2.best_epoch() == 5);

  // Another monitor: the saved best means nothing to it; refused, nothing changes.
  fx::reduce_lr_on_plateau on_loss{opt2, {.monitor = fx::monitor::loss}};
  fx::early_stopping stop3{{.patience = 4}};
  fx::checkpoint other{{"plateau", on_loss}, {"stop", stop3}};
  CHECK(restore_error(other, path) ==
        "checkpoint::restore: '" + path + "': 'plateau/monitor' is 'val_accuracy (max)' in the file's metadata, "
        "'loss (min)' in the program: the saved state of 'plateau' does not apply to it");
  CHECK(stop3.best_epoch() == -1);
  CHECK(on_loss.reductions() == 0);

  // A NaN best or a negative count is refused before anything is assigned.
  auto tampered = [&](const std::string& name, auto value) {
    fx::io::safetensors f = fx::io::safetensors::load(path);
    fx::io::safetensors out;
    for (const auto& n : f.names()) {
      if (n == name) out.add(n, fx::tensor<decltype(value)>(value));
      else if (n.find("best") != std::string::npos && n != "stop/best_epoch") out.add(n, f.get<double>(n));
      else out.add(n, f.get<std::int64_t>(n));
    }
    for (const auto& [k, v] : f.metadata()) out.set_metadata(k, v);
    out.save(dir.file("tampered.safetensors"));
    return restore_error(ckpt2, dir.file("tampered"));
  };
  CHECK(tampered("plateau/best", std::numeric_limits<double>::quiet_NaN()) ==
        "checkpoint::restore: '" + dir.file("tampered.safetensors") + "': 'plateau/best' is NaN");
  CHECK(tampered("stop/wait", std::int64_t{-1}) ==
        "checkpoint::restore: '" + dir.file("tampered.safetensors") + "': 'stop/wait' = -1 is not in [0, 2147483647]");
  CHECK(tampered("stop/best_epoch", std::int64_t{-2}) ==
        "checkpoint::restore: '" + dir.file("tampered.safetensors") + "': 'stop/best_epoch' = -2 is not in [-1, 2147483647]");
  CHECK(stop2.best_epoch() == 5);

  // A file without the callbacks (saved before they were tracked): an error naming the first
  // missing label; with allow_partial, they are left as they are.
  fx::optim::sgd other_opt{0.1};
  const std::string without = fx::checkpoint{{"optimizer", other_opt}}.save(dir.file("without"));
  fx::checkpoint both{{"optimizer", opt2}, {"plateau", plateau2}};
  CHECK(restore_error(both, without) ==
        "checkpoint::restore: '" + without + "': 'plateau/monitor' is missing in the file's metadata, "
        "'val_accuracy (max)' in the program: the saved state of 'plateau' does not apply to it");
  both.restore(without, {.allow_partial = true});
  CHECK(plateau2.reductions() == 3);

  // early_stopping with restore_best_weights cannot be checkpointed: its copy of the best weights
  // would not be in the file.
  auto net = make_mlp(1);
  fx::early_stopping keeps{net, {.restore_best_weights = true}};
  CHECK_THROWS_WITH_AS((fx::checkpoint{{"stop", keeps}}), doctest::Contains("early_stopping: a checkpoint cannot hold the copy"),
                       fx::invalid_argument);

  // A program's own object: any struct with checkpoint_state(); its fields' names must differ.
  struct counter {
    int seen = 0;
    double total = 0;
    fx::state_fields checkpoint_state() { return {.reals = {{"total", &total}}, .integers = {{"seen", &seen}}}; }
  } mine{4, 2.5}, restored;
  const std::string own = fx::checkpoint{{"counter", mine}}.save(dir.file("own"));
  fx::checkpoint{{"counter", restored}}.restore(own);
  CHECK(restored.seen == 4);
  CHECK(restored.total == 2.5);
  struct twice {
    int a = 0;
    fx::state_fields checkpoint_state() { return {.integers = {{"n", &a}, {"n", &a}}}; }
  } bad;
  CHECK_THROWS_WITH_AS((fx::checkpoint{{"bad", bad}}), "checkpoint: object 'bad': its checkpoint_state() has two fields named 'n'",
                       fx::invalid_argument);
}

TEST_CASE("checkpoint: an optimizer's moving averages (use_ema) are slots: saved, restored, and refused where the program has none") {
  scratch_dir dir;
  fx::variable<float> w{fx::tensor<float>{1.f, 2.f, 3.f}, "w"};
  fx::optim::adam opt{{.learning_rate = 0.1, .use_ema = true, .ema_momentum = 0.5}};
  for (int step = 0; step < 3; ++step) opt.apply_gradients({fx::tensor<float>{0.5f, -1.f, 2.f}}, {w});
  const auto average = opt.get_slot(w, "average")->peek().to_vector();
  CHECK(average != w.peek().to_vector());
  const std::string path = fx::checkpoint{{"w", w}, {"optimizer", opt}}.save(dir.file("ema"));
  const auto file = fx::io::safetensors::load(path);
  CHECK(file.get<float>("optimizer/w/average").to_vector() == average);
  CHECK(*file.find_metadata("optimizer/use_ema") == "true");
  CHECK(*file.find_metadata("optimizer/ema_momentum") == "0.5");

  fx::variable<float> w2{fx::tensor<float>{0.f, 0.f, 0.f}, "w"};
  fx::optim::adam fresh{{.learning_rate = 0.1, .use_ema = true, .ema_momentum = 0.5}};
  fx::checkpoint{{"w", w2}, {"optimizer", fresh}}.restore(path);
  CHECK(fresh.get_slot(w2, "average")->peek().to_vector() == average);
  CHECK(w2.peek().to_vector() == w.peek().to_vector());
  fresh.finalize_variable_values(std::vector<fx::variable<float>*>{&w2});
  CHECK(w2.peek().to_vector() == average);

  fx::variable<float> w3{fx::tensor<float>{0.f, 0.f, 0.f}, "w"};
  fx::optim::adam without{0.1};
  fx::checkpoint other{{"w", w3}, {"optimizer", without}};
  CHECK(restore_error(other, path) ==
        "checkpoint::restore: '" + path + "': the file has a tensor 'optimizer/w/average' that no object of the checkpoint "
        "has (pass restore_options{.allow_partial = true} to ignore it)");
  other.restore(path, {.allow_partial = true});
  CHECK(w3.peek().to_vector() == w.peek().to_vector());
}

TEST_CASE("checkpoint: saved in the middle of a gradient accumulation cycle, training continues bit-identically") {
  scratch_dir dir;
  auto net_a = make_mlp(1);
  fx::optim::adam opt_a{{.learning_rate = 0.05, .gradient_accumulation_steps = 3}};
  fx::random::generator data_a{7};
  fx::checkpoint ckpt_a{{"model", net_a}, {"optimizer", opt_a}, {"data", data_a}};
  for (int i = 0; i < 4; ++i) train_step(net_a, opt_a, data_a);  // one update, then a call into the next cycle
  const std::string path = ckpt_a.save(dir.file("accumulating"));
  const snapshot at_save = take_snapshot(net_a, opt_a, 0, data_a);
  for (int i = 0; i < 5; ++i) train_step(net_a, opt_a, data_a);  // the cycle's two other calls, then a whole cycle
  const snapshot a = take_snapshot(net_a, opt_a, 0, data_a);
  CHECK(opt_a.updates() == 3);

  const auto file = fx::io::safetensors::load(path);
  const auto sum = file.get<float>("optimizer/dense/kernel/gradient_accumulator").to_vector();
  CHECK(std::any_of(sum.begin(), sum.end(), [](float x) { return x != 0; }));  // the saved call's gradient
  CHECK(*file.find_metadata("optimizer/gradient_accumulation_steps") == "3");

  auto net_b = make_mlp(99);
  fx::optim::adam opt_b{{.learning_rate = 0.05, .gradient_accumulation_steps = 3}};
  fx::random::generator data_b{12345};
  fx::checkpoint ckpt_b{{"model", net_b}, {"optimizer", opt_b}, {"data", data_b}};
  ckpt_b.restore(path);
  CHECK(bit_identical(take_snapshot(net_b, opt_b, 0, data_b), at_save));
  CHECK(opt_b.iterations() == 4);
  CHECK(opt_b.updates() == 1);
  for (int i = 0; i < 5; ++i) train_step(net_b, opt_b, data_b);
  CHECK(bit_identical(take_snapshot(net_b, opt_b, 0, data_b), a));
  CHECK(!bit_identical(a, at_save));
}

TEST_CASE("checkpoint: resumed with other gradient accumulation steps, the update count (the schedule's step) carries on") {
  scratch_dir dir;
  const fx::optim::schedule rate = fx::optim::exponential_decay(0.05, 1, 0.5);
  auto net = make_mlp(1);
  fx::optim::adam every4{{.learning_rate = rate, .gradient_accumulation_steps = 4}};
  fx::random::generator data{7};
  for (int i = 0; i < 8; ++i) train_step(net, every4, data);
  CHECK(every4.updates() == 2);
  const std::string accumulated = fx::checkpoint{{"model", net}, {"optimizer", every4}}.save(dir.file("every4"));
  CHECK(fx::io::safetensors::load(accumulated).get<std::int64_t>("optimizer/updates").item() == 2);

  // Into an optimizer that accumulates over 2 calls, and into one that does not.
  auto net2 = make_mlp(2);
  fx::optim::adam every2{{.learning_rate = rate, .gradient_accumulation_steps = 2}};
  fx::checkpoint{{"model", net2}, {"optimizer", every2}}.restore(accumulated);
  CHECK(every2.iterations() == 8);
  CHECK(every2.updates() == 2);
  CHECK(every2.learning_rate() == every4.learning_rate());
  auto net3 = make_mlp(3);
  fx::optim::adam plain{{.learning_rate = rate}};
  fx::checkpoint{{"model", net3}, {"optimizer", plain}}.restore(accumulated, {.allow_partial = true});  // no accumulators
  CHECK(plain.updates() == 2);
  train_step(net3, plain, data);
  CHECK(plain.updates() == 3);
  CHECK(plain.iterations() == 9);

  // A file saved without accumulation has no update count or accumulators: they are the call
  // count and zeros.
  const std::string path = fx::checkpoint{{"model", net3}, {"optimizer", plain}}.save(dir.file("plain"));
  CHECK(fx::io::safetensors::load(path).find("optimizer/updates") != nullptr);  // 3 updates in 9 calls
  auto net4 = make_mlp(4);
  fx::optim::adam first{{.learning_rate = rate}};
  for (int i = 0; i < 3; ++i) train_step(net4, first, data);
  const std::string unaccumulated = fx::checkpoint{{"model", net4}, {"optimizer", first}}.save(dir.file("first"));
  CHECK(fx::io::safetensors::load(unaccumulated).find("optimizer/updates") == nullptr);
  auto net5 = make_mlp(5);
  fx::optim::adam later{{.learning_rate = rate, .gradient_accumulation_steps = 2}};
  train_step(net5, later, data);  // an accumulator that the restore must clear
  fx::checkpoint{{"model", net5}, {"optimizer", later}}.restore(unaccumulated);
  CHECK(later.iterations() == 3);
  CHECK(later.updates() == 3);
  const auto sum = later.get_slot(net5.layer<0>().kernel(), "gradient_accumulator")->peek().to_vector();
  CHECK(std::all_of(sum.begin(), sum.end(), [](float x) { return x == 0; }));
  CHECK(later.get_slot(net5.layer<0>().kernel(), "momentum")->peek().to_vector() ==
        first.get_slot(net4.layer<0>().kernel(), "momentum")->peek().to_vector());
}
