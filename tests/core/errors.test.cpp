// Error paths: each bad call throws the documented exception type, and its message names the op
// and the offending values (or shapes). Autodiff errors are in tests/autodiff/errors.test.cpp.
#include "../test_util.hpp"

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <limits>
#include <vector>

#include <fluxion/tensor/creation.hpp>
#include <fluxion/tensor/random.hpp>

namespace {
constexpr double inf = std::numeric_limits<double>::infinity();
constexpr double qnan = std::numeric_limits<double>::quiet_NaN();
constexpr float inff = std::numeric_limits<float>::infinity();
}  // namespace

TEST_CASE("errors: arange and linspace refuse non-finite or oversized ranges") {
  using doctest::Contains;
  CHECK_THROWS_WITH_AS(fx::arange(0.0, inf, 1.0),
                       Contains("arange: start, stop and step must be finite (start = 0, stop = inf, step = 1)"),
                       fx::invalid_argument);
  CHECK_THROWS_WITH_AS(fx::arange(qnan, 1.0),
                       Contains("arange: start, stop and step must be finite (start = nan, stop = 1, step = 1)"),
                       fx::invalid_argument);
  CHECK_THROWS_WITH_AS(fx::arange(0.f, 1.f, inff),
                       Contains("arange: start, stop and step must be finite (start = 0, stop = 1, step = inf)"),
                       fx::invalid_argument);
  CHECK_THROWS_WITH_AS(fx::arange(-inf, 0.0, 1.0), Contains("(start = -inf, stop = 0, step = 1)"),
                       fx::invalid_argument);
  // More elements than a double counts exactly (2^53).
  CHECK_THROWS_WITH_AS(fx::arange(0.0, 1e300),
                       Contains("arange: the range holds too many elements (start = 0, stop = 1e+300, step = 1)"),
                       fx::invalid_argument);
  CHECK_THROWS_WITH_AS(fx::arange(0.0, 1.0, 1e-300),
                       Contains("arange: the range holds too many elements (start = 0, stop = 1, step = 1e-300)"),
                       fx::invalid_argument);
  // A named integer type: arguments it cannot hold are refused rather than converted (undefined).
  CHECK_THROWS_WITH_AS(fx::arange<std::int32_t>(0.0, 1e300),
                       Contains("arange: start, stop and step must be finite values of the element type (start = 0, stop = 1e+300, step = 1)"),
                       fx::invalid_argument);
  CHECK_THROWS_WITH_AS(fx::arange<std::int64_t>(qnan, 1.0), Contains("must be finite values of the element type"),
                       fx::invalid_argument);
  // An integer range too long for any tensor is refused by its shape, before allocating.
  CHECK_THROWS_WITH_AS(fx::arange(std::int64_t{0}, std::numeric_limits<std::int64_t>::max()),
                       Contains("would give more than 2^56 elements"), fx::invalid_argument);
  CHECK_THROWS_WITH_AS(fx::tensor<double>(fx::shape{std::int64_t{1} << 61}), Contains("would give more than 2^56 elements"),
                       fx::invalid_argument);
  CHECK_THROWS_WITH_AS(fx::arange(0.5f, 2.f, 0.f),
                       Contains("arange: step must not be 0 (start = 0.5, stop = 2, step = 0)"), fx::invalid_argument);

  CHECK_THROWS_WITH_AS(fx::linspace(0.0, inf, 5), Contains("linspace: start = 0 and stop = inf must be finite"),
                       fx::invalid_argument);
  CHECK_THROWS_WITH_AS(fx::linspace(qnan, 1.0, 5), Contains("linspace: start = nan and stop = 1 must be finite"),
                       fx::invalid_argument);
  CHECK_THROWS_WITH_AS(fx::linspace<float>(-inff, 0.f, 3), Contains("linspace: start = -inf and stop = 0 must be finite"),
                       fx::invalid_argument);
  CHECK_THROWS_WITH_AS(fx::linspace(0.f, 1.f, -1),
                       Contains("linspace: num = -1 must be non-negative (start = 0, stop = 1)"), fx::invalid_argument);

  CHECK_THROWS_WITH_AS(fx::eye<float>(2, -3), Contains("eye: num_rows = 2 and num_columns = -3 must be non-negative"),
                       fx::invalid_argument);
  CHECK_THROWS_WITH_AS(fx::from_vector(std::vector<int>{1, 2, 3}, fx::shape{2, 2}),
                       Contains("from_vector: 3 values cannot fill shape (2, 2)"), fx::shape_error);
}

TEST_CASE("errors: random::uniform refuses a range that overflows") {
  using doctest::Contains;
  fx::random::generator gen{7};
  CHECK_THROWS_WITH_AS(fx::random::uniform<float>(fx::shape{3}, gen, -3e38f, 3e38f),
                       Contains("uniform: the range from minval = -3e+38 to maxval = 3e+38 must be finite"),
                       fx::invalid_argument);
  CHECK_THROWS_WITH_AS(fx::random::uniform<double>(fx::shape{3}, gen, -inf, 0.0),
                       Contains("uniform: the range from minval = -inf to maxval = 0 must be finite"),
                       fx::invalid_argument);
  CHECK_THROWS_WITH_AS(fx::random::uniform<double>(fx::shape{3}, gen, 0.0, qnan),
                       Contains("uniform: minval = 0 must be less than maxval = nan"), fx::invalid_argument);
  CHECK(gen.offset() == 0);  // a rejected call draws nothing
}

TEST_CASE("errors: remaps (strided_slice, slice, transpose, squeeze, broadcast_to)") {
  using doctest::Contains;
  const fx::tensor<int> m = {{1, 2, 3}, {4, 5, 6}};

  CHECK_THROWS_WITH_AS(fx::strided_slice(m, {0, 0}, {1}),
                       Contains("strided_slice: begin, end and strides have 2, 1 and 0 entries for shape (2, 3)"),
                       fx::invalid_argument);
  CHECK_THROWS_WITH_AS(fx::strided_slice(m, {0}, {1}, {1, 1}),
                       Contains("strided_slice: begin, end and strides have 1, 1 and 2 entries for shape (2, 3)"),
                       fx::invalid_argument);
  CHECK_THROWS_WITH_AS(fx::strided_slice(m, {0, 0, 0}, {1, 1, 1}),
                       Contains("strided_slice: begin, end and strides have 3, 3 and 0 entries for shape (2, 3)"),
                       fx::invalid_argument);
  CHECK_THROWS_WITH_AS(fx::strided_slice(m, {0, 0}, {2, 3}, {1, 0}), Contains("strided_slice: step on axis 1 is 0"),
                       fx::invalid_argument);

  CHECK_THROWS_WITH_AS(fx::slice(m, {0}, {1}), Contains("slice: begin and size need 2 entries for shape (2, 3)"),
                       fx::invalid_argument);
  CHECK_THROWS_WITH_AS(fx::slice(m, {0, 0}, {1}), Contains("slice: begin and size need 2 entries for shape (2, 3)"),
                       fx::invalid_argument);
  CHECK_THROWS_WITH_AS(fx::slice(m, {-1, 0}, {1, 1}),
                       Contains("slice: begin -1 and size 1 do not fit axis 0 of extent 2"), fx::out_of_range);

  CHECK_THROWS_WITH_AS(fx::transpose(m, {0, 2}), Contains("transpose: axis 2 is out of range [-2, 2) for rank 2"),
                       fx::out_of_range);
  CHECK_THROWS_WITH_AS(fx::transpose(m, {-3, 0}), Contains("transpose: axis -3 is out of range [-2, 2) for rank 2"),
                       fx::out_of_range);
  CHECK_THROWS_WITH_AS(fx::transpose(m, {1, 1}), Contains("transpose: axis 1 appears twice in perm"),
                       fx::invalid_argument);
  CHECK_THROWS_WITH_AS(fx::permute(m, {0}), Contains("transpose: perm has 1 entries for shape (2, 3)"),
                       fx::invalid_argument);

  CHECK_THROWS_WITH_AS(fx::squeeze(m, {1}), Contains("squeeze: axis 1 of shape (2, 3) has extent 3, not 1"),
                       fx::invalid_argument);
  CHECK_THROWS_WITH_AS(fx::squeeze(fx::tensor<int>(fx::shape{1, 4}), {-1}),
                       Contains("squeeze: axis -1 of shape (1, 4) has extent 4, not 1"), fx::invalid_argument);
  CHECK_THROWS_WITH_AS(fx::squeeze(m, {2}), Contains("squeeze: axis 2 is out of range [-2, 2) for rank 2"),
                       fx::out_of_range);

  CHECK_THROWS_WITH_AS(fx::broadcast_to(m, {3, 3}), Contains("broadcast_to: shapes (2, 3) and (3, 3) cannot be broadcast"),
                       fx::shape_error);
  // Shapes that broadcast together, but not the operand to the target.
  CHECK_THROWS_WITH_AS(fx::broadcast_to(fx::tensor<int>(fx::shape{3, 1}), {1, 3}),
                       Contains("broadcast_to: shape (3, 1) cannot be broadcast to (1, 3)"), fx::shape_error);
  CHECK_THROWS_WITH_AS(fx::broadcast_to(fx::tensor<int>(fx::shape{1, 3}), {3}),
                       Contains("broadcast_to: shape (1, 3) cannot be broadcast to (3,)"), fx::shape_error);
}

TEST_CASE("errors: indexing (concat, stack, split, pad, one_hot)") {
  using doctest::Contains;
  const fx::tensor<int> a = {{1, 2}, {3, 4}}, b = {{5, 6}};

  CHECK_THROWS_WITH_AS(fx::concat(std::vector<fx::tensor<int>>{}, 0), Contains("concat: no tensors to concatenate"),
                       fx::invalid_argument);
  CHECK_THROWS_WITH_AS(fx::concat({a, b}, 2), Contains("concat: axis 2 is out of range [-2, 2) for rank 2"),
                       fx::out_of_range);
  CHECK_THROWS_WITH_AS(fx::stack(std::vector<fx::tensor<int>>{}), Contains("stack: no tensors to stack"),
                       fx::invalid_argument);
  CHECK_THROWS_WITH_AS(fx::stack({a, b}), Contains("stack: shapes (2, 2) and (1, 2) differ"), fx::shape_error);
  CHECK_THROWS_WITH_AS(fx::stack({b, a}, 1), Contains("stack: shapes (1, 2) and (2, 2) differ"), fx::shape_error);

  const fx::tensor<int> x = {{1, 2, 3, 4, 5}};
  CHECK_THROWS_WITH_AS(fx::split(x, std::vector<fx::index_t>{2, -3}, 1), Contains("split: size -3 is negative"),
                       fx::invalid_argument);
  CHECK_THROWS_WITH_AS(fx::split(x, std::vector<fx::index_t>{2, 2}, 1),
                       Contains("split: sizes add up to 4 but axis 1 of shape (1, 5) has extent 5"), fx::shape_error);
  CHECK_THROWS_WITH_AS(fx::split(x, std::vector<fx::index_t>{4, -1, 3}, 1),
                       Contains("split: sizes add up to 7 but axis 1 of shape (1, 5) has extent 5"), fx::shape_error);
  CHECK_THROWS_WITH_AS(fx::split(x, 0, 1), Contains("split: axis 1 of shape (1, 5) cannot be split into 0 equal pieces"),
                       fx::invalid_argument);

  CHECK_THROWS_WITH_AS(fx::pad(a, {{0, 0}, {-1, 2}}), Contains("pad: paddings (-1, 2) on axis 1 are negative"),
                       fx::invalid_argument);
  CHECK_THROWS_WITH_AS(fx::pad(a, {{3, -2}, {0, 0}}), Contains("pad: paddings (3, -2) on axis 0 are negative"),
                       fx::invalid_argument);
  CHECK_THROWS_WITH_AS(fx::pad(a, {{0, 1}}), Contains("pad: 1 paddings given for shape (2, 2)"), fx::invalid_argument);
  CHECK_THROWS_WITH_AS(fx::pad(a, {{0, 1}, {0, 1}, {0, 1}}), Contains("pad: 3 paddings given for shape (2, 2)"),
                       fx::invalid_argument);

  const fx::tensor<int> labels = {0, 2};
  CHECK_THROWS_WITH_AS(fx::one_hot(labels, -1), Contains("one_hot: depth = -1 is negative"), fx::invalid_argument);
  CHECK_THROWS_WITH_AS(fx::one_hot(labels, 3, 1.f, 0.f, 2), Contains("one_hot: axis 2 is out of range [-2, 2) for rank 2"),
                       fx::out_of_range);
}

TEST_CASE("errors: variable::assign of a value that broadcasts past the variable's shape") {
  using doctest::Contains;
  fx::variable<float> v{fx::tensor<float>{{1.f, 2.f}}, "bias"};
  CHECK_THROWS_WITH_AS(v.assign(fx::tensor<float>{{1.f, 2.f}, {3.f, 4.f}}),
                       Contains("assign: cannot assign a value of shape (2, 2) to variable 'bias' of shape (1, 2)"),
                       fx::shape_error);
  CHECK_THROWS_WITH_AS(v.assign(fx::tensor<float>(fx::shape{3, 1, 2})),
                       Contains("assign: cannot assign a value of shape (3, 1, 2) to variable 'bias' of shape (1, 2)"),
                       fx::shape_error);
  CHECK(v.value().to_vector() == std::vector<float>{1.f, 2.f});  // unchanged
}

TEST_CASE("errors: reductions (repeated axes, argmax and argmin axes out of range)") {
  using doctest::Contains;
  const fx::tensor<float> x = {{1.f, 5.f, 2.f}, {7.f, 0.f, 3.f}};
  CHECK_THROWS_WITH_AS(fx::reduce_sum(x, {1, 1}), Contains("reduce_sum: axis 1 is repeated"), fx::invalid_argument);
  CHECK_THROWS_WITH_AS(fx::reduce_mean(x, {1, -1}), Contains("reduce_mean: axis -1 is repeated"), fx::invalid_argument);
  CHECK_THROWS_WITH_AS(fx::any(x > 0.f, {0, -2}), Contains("any: axis -2 is repeated"), fx::invalid_argument);
  CHECK_THROWS_WITH_AS(fx::argmax(x, 2), Contains("argmax: axis 2 is out of range [-2, 2) for rank 2"), fx::out_of_range);
  CHECK_THROWS_WITH_AS(fx::argmax(x, -3), Contains("argmax: axis -3 is out of range [-2, 2) for rank 2"),
                       fx::out_of_range);
  CHECK_THROWS_WITH_AS(fx::argmin(x * 2.f, 5), Contains("argmin: axis 5 is out of range [-2, 2) for rank 2"),
                       fx::out_of_range);
  CHECK_THROWS_WITH_AS(fx::argmax(fx::tensor<float>(3.f), 0), Contains("argmax: axis 0 is out of range [] for rank 0"),
                       fx::out_of_range);
}

TEST_CASE("errors: element access, item() and the truth value of several elements") {
  using doctest::Contains;
  const fx::tensor<float> t = {{1.f, 2.f, 3.f}, {4.f, 5.f, 6.f}};
  CHECK_THROWS_WITH_AS(t(0), Contains("tensor: 1 indices given for a tensor of rank 2 and shape (2, 3)"),
                       fx::invalid_argument);
  CHECK_THROWS_WITH_AS(t(0, 0, 0), Contains("tensor: 3 indices given for a tensor of rank 2 and shape (2, 3)"),
                       fx::invalid_argument);
  CHECK_THROWS_WITH_AS(t(1, 3), Contains("tensor: index 3 is out of range for axis 1 with size 3"), fx::out_of_range);
  CHECK_THROWS_WITH_AS(t(-3, 0), Contains("tensor: index -3 is out of range for axis 0 with size 2"), fx::out_of_range);

  CHECK_THROWS_WITH_AS(t.item(), Contains("item: tensor of shape (2, 3) has 6 elements, not 1"), fx::invalid_argument);
  CHECK_THROWS_WITH_AS(fx::tensor<int>(fx::shape{0}).item(), Contains("item: tensor of shape (0,) has 0 elements, not 1"),
                       fx::invalid_argument);

  CHECK_THROWS_WITH_AS((void)static_cast<bool>(t),
                       Contains("bool: the truth value of a tensor of shape (2, 3) with 6 elements is ambiguous"),
                       fx::invalid_argument);
  CHECK_THROWS_WITH_AS((void)static_cast<bool>(t > 2.f),
                       Contains("bool: the truth value of a tensor of shape (2, 3) with 6 elements is ambiguous"),
                       fx::invalid_argument);
  CHECK_THROWS_WITH_AS((void)static_cast<bool>(fx::any(t > 2.f, 1)),
                       Contains("bool: the truth value of a tensor of shape (2,) with 2 elements is ambiguous"),
                       fx::invalid_argument);
  CHECK(static_cast<bool>(fx::all(t > 0.f)));  // one element: fine
}

TEST_CASE("errors: rethrow_with_context keeps the type and the value, and does not repeat the op") {
  const auto rethrown = [](auto e, const std::string& where) {
    try {
      try {
        throw e;
      } catch (const fx::error&) {
        fx::detail::rethrow_with_context(where);
      }
    } catch (const decltype(e)& r) {
      return std::pair{std::string(r.what()), true};
    } catch (const std::exception& r) {
      return std::pair{std::string(r.what()), false};
    }
    return std::pair{std::string(), false};
  };
  CHECK(rethrown(fx::shape_error("add: shapes (2,) and (3,)"), "fit: step 1: ") ==
        std::pair{std::string("fit: step 1: add: shapes (2,) and (3,)"), true});
  CHECK(rethrown(fx::out_of_range("fit: class_weight has 2 classes"), "fit: step 1: ") ==
        std::pair{std::string("fit: step 1: class_weight has 2 classes"), true});
  CHECK(rethrown(fx::io_error("idx: short"), "evaluate: batch 2: ").first == "evaluate: batch 2: idx: short");
  CHECK(rethrown(fx::invalid_argument("x"), "a: ").second);
  CHECK(rethrown(fx::error("x"), "a: ").second);
  try {
    try {
      throw fx::numeric_error("loss: nan", 2.5);
    } catch (const fx::error&) {
      fx::detail::rethrow_with_context("fit: step 4: ");
    }
  } catch (const fx::numeric_error& e) {
    CHECK(std::string(e.what()) == "fit: step 4: loss: nan");
    CHECK(e.value() == 2.5);
  }
  // Not a fluxion error: passes as it is.
  CHECK_THROWS_WITH_AS(
      [] {
        try {
          throw std::runtime_error("other");
        } catch (const std::exception&) {
          fx::detail::rethrow_with_context("fit: ");
        }
      }(),
      "other", std::runtime_error);
}
