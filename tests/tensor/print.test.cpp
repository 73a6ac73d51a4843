// Printing against NumPy: every expected string below is NumPy 2.4's repr of the same array under
// the default print options, with "array" renamed "tensor" and "dtype=..., shape=...)" appended by
// NumPy's own rule for placing extras. The strings were derived once with this oracle and pasted
// here, so the test needs no Python:
//
//   def rep(a):
//       lst = "[]" if a.size == 0 else np.array2string(a, separator=", ", prefix="tensor(", suffix=")")
//       s = "tensor(" + lst + ","
//       tail = f"dtype={a.dtype.name}, shape={a.shape})"
//       last = len(s) - (s.rfind("\n") + 1)
//       return s + ("\n" + " " * 7 if last + len(tail) + 1 > 75 else " ") + tail
//
// Beyond these cases, 9000 random arrays (every dtype, ranks 0 to 3, magnitudes from 1e-300 to
// 1e300, nan, inf, -0., summaries) printed identically to this oracle when the printer was written.
#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <fluxion/tensor.hpp>
#include <fluxion/tensor/creation.hpp>
#include <fluxion/tensor/print.hpp>

namespace fx = fluxion;

namespace {

constexpr float nanf = std::numeric_limits<float>::quiet_NaN();
constexpr float inff = std::numeric_limits<float>::infinity();
constexpr double nan = std::numeric_limits<double>::quiet_NaN();
constexpr double inf = std::numeric_limits<double>::infinity();

/// A tensor of shape s whose element i is f(i), built without any expression.
template <class T, class F>
fx::tensor<T> generated(const fx::shape& s, F f) {
  std::vector<T> v(static_cast<std::size_t>(s.size()));
  for (fx::index_t i = 0; i < s.size(); ++i) v[static_cast<std::size_t>(i)] = f(i);
  return fx::from_vector(v, s);
}

struct print_case {
  const char* name;
  std::string (*print)();
  const char* expected;
};

const print_case print_cases[] = {
    {"matmul result",
     [] { return fx::to_string(fx::from_vector(std::vector<float>{4.0f}, fx::shape{1, 1})); },
     "tensor([[4.]], dtype=float32, shape=(1, 1))"},
    {"int32 vector",
     [] { return fx::to_string(fx::from_vector(std::vector<std::int32_t>{1, 2, 3}, fx::shape{3})); },
     "tensor([1, 2, 3], dtype=int32, shape=(3,))"},
    {"rank-0 bool",
     [] { return fx::to_string(fx::from_vector(std::vector<bool>{true}, fx::shape{})); },
     "tensor(True, dtype=bool, shape=())"},
    {"rank-0 float",
     [] { return fx::to_string(fx::from_vector(std::vector<float>{4.0f}, fx::shape{})); },
     "tensor(4., dtype=float32, shape=())"},
    {"rank-0 int64",
     [] { return fx::to_string(fx::from_vector(std::vector<std::int64_t>{-7}, fx::shape{})); },
     "tensor(-7, dtype=int64, shape=())"},
    {"aligned points",
     [] { return fx::to_string(fx::from_vector(std::vector<float>{1.5f, 2.0f}, fx::shape{2})); },
     "tensor([1.5, 2. ], dtype=float32, shape=(2,))"},
    {"matrix",
     [] { return fx::to_string(fx::from_vector(std::vector<float>{1.0f, 2.0f, 3.0f, 4.0f}, fx::shape{2, 2})); },
     "tensor([[1., 2.],\n"
     "        [3., 4.]], dtype=float32, shape=(2, 2))"},
    {"negative integers",
     [] { return fx::to_string(fx::from_vector(std::vector<std::int64_t>{1, -10, 100}, fx::shape{3})); },
     "tensor([  1, -10, 100], dtype=int64, shape=(3,))"},
    {"int32 extremes",
     [] {
       return fx::to_string(fx::from_vector(std::vector<std::int32_t>{
           std::numeric_limits<std::int32_t>::min(), 2147483647
       }, fx::shape{2}));
     },
     "tensor([-2147483648,  2147483647], dtype=int32, shape=(2,))"},
    {"bool vector",
     [] { return fx::to_string(fx::from_vector(std::vector<bool>{true, false, true}, fx::shape{3})); },
     "tensor([ True, False,  True], dtype=bool, shape=(3,))"},
    {"bool matrix",
     [] { return fx::to_string(fx::from_vector(std::vector<bool>{false, false, true, false}, fx::shape{2, 2})); },
     "tensor([[False, False],\n"
     "        [ True, False]], dtype=bool, shape=(2, 2))"},
    {"nan and inf",
     [] { return fx::to_string(fx::from_vector(std::vector<float>{1.0f, nanf, -inff, 2.5f}, fx::shape{4})); },
     "tensor([ 1. ,  nan, -inf,  2.5], dtype=float32, shape=(4,))"},
    {"only nan",
     [] { return fx::to_string(fx::from_vector(std::vector<double>{nan, nan}, fx::shape{2})); },
     "tensor([nan, nan], dtype=float64, shape=(2,))"},
    {"only inf",
     [] { return fx::to_string(fx::from_vector(std::vector<float>{inff, -inff}, fx::shape{2})); },
     "tensor([ inf, -inf], dtype=float32, shape=(2,))"},
    {"small values switch to scientific",
     [] { return fx::to_string(fx::from_vector(std::vector<double>{1e-05, 1.5e-05, 1.0}, fx::shape{3})); },
     "tensor([1.0e-05, 1.5e-05, 1.0e+00], dtype=float64, shape=(3,))"},
    {"float32 switches at 1e6",
     [] { return fx::to_string(fx::from_vector(std::vector<float>{1e+06f, 1.0f}, fx::shape{2})); },
     "tensor([1.e+06, 1.e+00], dtype=float32, shape=(2,))"},
    {"float32 below 1e6",
     [] { return fx::to_string(fx::from_vector(std::vector<float>{999999.0f, 1.0f}, fx::shape{2})); },
     "tensor([9.99999e+05, 1.00000e+00], dtype=float32, shape=(2,))"},
    {"float64 switches at 1e8",
     [] { return fx::to_string(fx::from_vector(std::vector<double>{100000000.0, 1500.0}, fx::shape{2})); },
     "tensor([1.0e+08, 1.5e+03], dtype=float64, shape=(2,))"},
    {"float64 below 1e8",
     [] { return fx::to_string(fx::from_vector(std::vector<double>{99999999.0, 1500.0}, fx::shape{2})); },
     "tensor([9.9999999e+07, 1.5000000e+03], dtype=float64, shape=(2,))"},
    {"ratio above 1000",
     [] { return fx::to_string(fx::from_vector(std::vector<double>{1.0, 1001.0}, fx::shape{2})); },
     "tensor([1.000e+00, 1.001e+03], dtype=float64, shape=(2,))"},
    {"ratio of 1000",
     [] { return fx::to_string(fx::from_vector(std::vector<double>{1.0, 1000.0}, fx::shape{2})); },
     "tensor([   1., 1000.], dtype=float64, shape=(2,))"},
    {"three-digit exponents",
     [] { return fx::to_string(fx::from_vector(std::vector<double>{1e-100, 1e+100}, fx::shape{2})); },
     "tensor([1.e-100, 1.e+100], dtype=float64, shape=(2,))"},
    {"negative scientific",
     [] { return fx::to_string(fx::from_vector(std::vector<float>{-1.5e-05f, 2e-07f, 0.0f}, fx::shape{3})); },
     "tensor([-1.5e-05,  2.0e-07,  0.0e+00], dtype=float32, shape=(3,))"},
    {"scientific with nan",
     [] { return fx::to_string(fx::from_vector(std::vector<double>{1e-05, nan, -inf}, fx::shape{3})); },
     "tensor([1.e-05,    nan,   -inf], dtype=float64, shape=(3,))"},
    {"eight digits",
     [] {
       return fx::to_string(fx::from_vector(std::vector<double>{
           3.141592653589793, 2.718281828459045
       }, fx::shape{2}));
     },
     "tensor([3.14159265, 2.71828183], dtype=float64, shape=(2,))"},
    {"rounding to eight digits",
     [] { return fx::to_string(fx::from_vector(std::vector<double>{0.1, 0.2, 0.30000000000000004}, fx::shape{3})); },
     "tensor([0.1, 0.2, 0.3], dtype=float64, shape=(3,))"},
    {"float32 thirds",
     [] { return fx::to_string(fx::from_vector(std::vector<float>{0.33333334f, 0.6666667f, 1.0f}, fx::shape{3})); },
     "tensor([0.33333334, 0.6666667 , 1.        ], dtype=float32, shape=(3,))"},
    {"negative zero",
     [] { return fx::to_string(fx::from_vector(std::vector<double>{-0.0, 1.0}, fx::shape{2})); },
     "tensor([-0.,  1.], dtype=float64, shape=(2,))"},
    {"zeros",
     [] { return fx::to_string(fx::from_vector(std::vector<float>{0.0f, 0.0f, 0.0f, 0.0f}, fx::shape{2, 2})); },
     "tensor([[0., 0.],\n"
     "        [0., 0.]], dtype=float32, shape=(2, 2))"},
    {"rank 3",
     [] {
       return fx::to_string(fx::from_vector(std::vector<std::int32_t>{
           0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11
       }, fx::shape{2, 2, 3}));
     },
     "tensor([[[ 0,  1,  2],\n"
     "         [ 3,  4,  5]],\n"
     "\n"
     "        [[ 6,  7,  8],\n"
     "         [ 9, 10, 11]]], dtype=int32, shape=(2, 2, 3))"},
    {"rank 4",
     [] {
       return fx::to_string(fx::from_vector(std::vector<float>{
           0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 2.5f, 3.0f, 3.5f
       }, fx::shape{2, 1, 2, 2}));
     },
     "tensor([[[[0. , 0.5],\n"
     "          [1. , 1.5]]],\n"
     "\n"
     "\n"
     "        [[[2. , 2.5],\n"
     "          [3. , 3.5]]]], dtype=float32, shape=(2, 1, 2, 2))"},
    {"small positional values",
     [] { return fx::to_string(fx::from_vector(std::vector<double>{0.0001, 0.00012345678}, fx::shape{2})); },
     "tensor([0.0001    , 0.00012346], dtype=float64, shape=(2,))"},
    {"large positional values",
     [] { return fx::to_string(fx::from_vector(std::vector<double>{12345678.5, -0.25}, fx::shape{2})); },
     "tensor([ 1.23456785e+07, -2.50000000e-01], dtype=float64, shape=(2,))"},
    {"float32 digits",
     [] { return fx::to_string(fx::from_vector(std::vector<float>{0.1f, 1.6777216e+07f, 0.3f}, fx::shape{3})); },
     "tensor([1.0000000e-01, 1.6777216e+07, 3.0000001e-01],\n"
     "       dtype=float32, shape=(3,))"},
    {"row wraps at 75 columns",
     [] { return fx::to_string(fx::arange(30)); },
     "tensor([ 0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11, 12, 13, 14, 15,\n"
     "        16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29],\n"
     "       dtype=int32, shape=(30,))"},
    {"floating row wraps",
     [] { return fx::to_string(fx::linspace(0.0, 1.0, 20)); },
     "tensor([0.        , 0.05263158, 0.10526316, 0.15789474, 0.21052632,\n"
     "        0.26315789, 0.31578947, 0.36842105, 0.42105263, 0.47368421,\n"
     "        0.52631579, 0.57894737, 0.63157895, 0.68421053, 0.73684211,\n"
     "        0.78947368, 0.84210526, 0.89473684, 0.94736842, 1.        ],\n"
     "       dtype=float64, shape=(20,))"},
    {"matrix rows wrap",
     [] { return fx::to_string(fx::tensor<std::int64_t>(fx::reshape(fx::arange<std::int64_t>(0, 40000, 1000), {2, 20}))); },
     "tensor([[    0,  1000,  2000,  3000,  4000,  5000,  6000,  7000,  8000,\n"
     "          9000, 10000, 11000, 12000, 13000, 14000, 15000, 16000, 17000,\n"
     "         18000, 19000],\n"
     "        [20000, 21000, 22000, 23000, 24000, 25000, 26000, 27000, 28000,\n"
     "         29000, 30000, 31000, 32000, 33000, 34000, 35000, 36000, 37000,\n"
     "         38000, 39000]], dtype=int64, shape=(2, 20))"},
    {"summary of a vector",
     [] { return fx::to_string(fx::arange(2000)); },
     "tensor([   0,    1,    2, ..., 1997, 1998, 1999],\n"
     "       dtype=int32, shape=(2000,))"},
    {"summary of a matrix",
     [] {
       return fx::to_string(
           generated<float>({3, 1000}, [](fx::index_t i) { return static_cast<float>(i) / 7.f; }));
     },
     "tensor([[0.0000000e+00, 1.4285715e-01, 2.8571430e-01, ..., 1.4242857e+02,\n"
     "         1.4257143e+02, 1.4271428e+02],\n"
     "        [1.4285715e+02, 1.4300000e+02, 1.4314285e+02, ..., 2.8528571e+02,\n"
     "         2.8542856e+02, 2.8557144e+02],\n"
     "        [2.8571429e+02, 2.8585715e+02, 2.8600000e+02, ..., 4.2814285e+02,\n"
     "         4.2828571e+02, 4.2842856e+02]], dtype=float32, shape=(3, 1000))"},
    {"summary of a rank-3 tensor",
     [] { return fx::to_string(fx::tensor<std::int64_t>(fx::reshape(fx::arange<std::int64_t>(2000), {10, 10, 20}))); },
     "tensor([[[   0,    1,    2, ...,   17,   18,   19],\n"
     "         [  20,   21,   22, ...,   37,   38,   39],\n"
     "         [  40,   41,   42, ...,   57,   58,   59],\n"
     "         ...,\n"
     "         [ 140,  141,  142, ...,  157,  158,  159],\n"
     "         [ 160,  161,  162, ...,  177,  178,  179],\n"
     "         [ 180,  181,  182, ...,  197,  198,  199]],\n"
     "\n"
     "        [[ 200,  201,  202, ...,  217,  218,  219],\n"
     "         [ 220,  221,  222, ...,  237,  238,  239],\n"
     "         [ 240,  241,  242, ...,  257,  258,  259],\n"
     "         ...,\n"
     "         [ 340,  341,  342, ...,  357,  358,  359],\n"
     "         [ 360,  361,  362, ...,  377,  378,  379],\n"
     "         [ 380,  381,  382, ...,  397,  398,  399]],\n"
     "\n"
     "        [[ 400,  401,  402, ...,  417,  418,  419],\n"
     "         [ 420,  421,  422, ...,  437,  438,  439],\n"
     "         [ 440,  441,  442, ...,  457,  458,  459],\n"
     "         ...,\n"
     "         [ 540,  541,  542, ...,  557,  558,  559],\n"
     "         [ 560,  561,  562, ...,  577,  578,  579],\n"
     "         [ 580,  581,  582, ...,  597,  598,  599]],\n"
     "\n"
     "        ...,\n"
     "\n"
     "        [[1400, 1401, 1402, ..., 1417, 1418, 1419],\n"
     "         [1420, 1421, 1422, ..., 1437, 1438, 1439],\n"
     "         [1440, 1441, 1442, ..., 1457, 1458, 1459],\n"
     "         ...,\n"
     "         [1540, 1541, 1542, ..., 1557, 1558, 1559],\n"
     "         [1560, 1561, 1562, ..., 1577, 1578, 1579],\n"
     "         [1580, 1581, 1582, ..., 1597, 1598, 1599]],\n"
     "\n"
     "        [[1600, 1601, 1602, ..., 1617, 1618, 1619],\n"
     "         [1620, 1621, 1622, ..., 1637, 1638, 1639],\n"
     "         [1640, 1641, 1642, ..., 1657, 1658, 1659],\n"
     "         ...,\n"
     "         [1740, 1741, 1742, ..., 1757, 1758, 1759],\n"
     "         [1760, 1761, 1762, ..., 1777, 1778, 1779],\n"
     "         [1780, 1781, 1782, ..., 1797, 1798, 1799]],\n"
     "\n"
     "        [[1800, 1801, 1802, ..., 1817, 1818, 1819],\n"
     "         [1820, 1821, 1822, ..., 1837, 1838, 1839],\n"
     "         [1840, 1841, 1842, ..., 1857, 1858, 1859],\n"
     "         ...,\n"
     "         [1940, 1941, 1942, ..., 1957, 1958, 1959],\n"
     "         [1960, 1961, 1962, ..., 1977, 1978, 1979],\n"
     "         [1980, 1981, 1982, ..., 1997, 1998, 1999]]],\n"
     "       dtype=int64, shape=(10, 10, 20))"},
    {"large but not summarized along short axes",
     [] {
       return fx::to_string(
           fx::tensor<std::int32_t>(fx::reshape(fx::tensor<std::int32_t>(fx::arange(1296) % 7), {6, 6, 6, 6})));
     },
     "tensor([[[[0, 1, 2, 3, 4, 5],\n"
     "          [6, 0, 1, 2, 3, 4],\n"
     "          [5, 6, 0, 1, 2, 3],\n"
     "          [4, 5, 6, 0, 1, 2],\n"
     "          [3, 4, 5, 6, 0, 1],\n"
     "          [2, 3, 4, 5, 6, 0]],\n"
     "\n"
     "         [[1, 2, 3, 4, 5, 6],\n"
     "          [0, 1, 2, 3, 4, 5],\n"
     "          [6, 0, 1, 2, 3, 4],\n"
     "          [5, 6, 0, 1, 2, 3],\n"
     "          [4, 5, 6, 0, 1, 2],\n"
     "          [3, 4, 5, 6, 0, 1]],\n"
     "\n"
     "         [[2, 3, 4, 5, 6, 0],\n"
     "          [1, 2, 3, 4, 5, 6],\n"
     "          [0, 1, 2, 3, 4, 5],\n"
     "          [6, 0, 1, 2, 3, 4],\n"
     "          [5, 6, 0, 1, 2, 3],\n"
     "          [4, 5, 6, 0, 1, 2]],\n"
     "\n"
     "         [[3, 4, 5, 6, 0, 1],\n"
     "          [2, 3, 4, 5, 6, 0],\n"
     "          [1, 2, 3, 4, 5, 6],\n"
     "          [0, 1, 2, 3, 4, 5],\n"
     "          [6, 0, 1, 2, 3, 4],\n"
     "          [5, 6, 0, 1, 2, 3]],\n"
     "\n"
     "         [[4, 5, 6, 0, 1, 2],\n"
     "          [3, 4, 5, 6, 0, 1],\n"
     "          [2, 3, 4, 5, 6, 0],\n"
     "          [1, 2, 3, 4, 5, 6],\n"
     "          [0, 1, 2, 3, 4, 5],\n"
     "          [6, 0, 1, 2, 3, 4]],\n"
     "\n"
     "         [[5, 6, 0, 1, 2, 3],\n"
     "          [4, 5, 6, 0, 1, 2],\n"
     "          [3, 4, 5, 6, 0, 1],\n"
     "          [2, 3, 4, 5, 6, 0],\n"
     "          [1, 2, 3, 4, 5, 6],\n"
     "          [0, 1, 2, 3, 4, 5]]],\n"
     "\n"
     "\n"
     "        [[[6, 0, 1, 2, 3, 4],\n"
     "          [5, 6, 0, 1, 2, 3],\n"
     "          [4, 5, 6, 0, 1, 2],\n"
     "          [3, 4, 5, 6, 0, 1],\n"
     "          [2, 3, 4, 5, 6, 0],\n"
     "          [1, 2, 3, 4, 5, 6]],\n"
     "\n"
     "         [[0, 1, 2, 3, 4, 5],\n"
     "          [6, 0, 1, 2, 3, 4],\n"
     "          [5, 6, 0, 1, 2, 3],\n"
     "          [4, 5, 6, 0, 1, 2],\n"
     "          [3, 4, 5, 6, 0, 1],\n"
     "          [2, 3, 4, 5, 6, 0]],\n"
     "\n"
     "         [[1, 2, 3, 4, 5, 6],\n"
     "          [0, 1, 2, 3, 4, 5],\n"
     "          [6, 0, 1, 2, 3, 4],\n"
     "          [5, 6, 0, 1, 2, 3],\n"
     "          [4, 5, 6, 0, 1, 2],\n"
     "          [3, 4, 5, 6, 0, 1]],\n"
     "\n"
     "         [[2, 3, 4, 5, 6, 0],\n"
     "          [1, 2, 3, 4, 5, 6],\n"
     "          [0, 1, 2, 3, 4, 5],\n"
     "          [6, 0, 1, 2, 3, 4],\n"
     "          [5, 6, 0, 1, 2, 3],\n"
     "          [4, 5, 6, 0, 1, 2]],\n"
     "\n"
     "         [[3, 4, 5, 6, 0, 1],\n"
     "          [2, 3, 4, 5, 6, 0],\n"
     "          [1, 2, 3, 4, 5, 6],\n"
     "          [0, 1, 2, 3, 4, 5],\n"
     "          [6, 0, 1, 2, 3, 4],\n"
     "          [5, 6, 0, 1, 2, 3]],\n"
     "\n"
     "         [[4, 5, 6, 0, 1, 2],\n"
     "          [3, 4, 5, 6, 0, 1],\n"
     "          [2, 3, 4, 5, 6, 0],\n"
     "          [1, 2, 3, 4, 5, 6],\n"
     "          [0, 1, 2, 3, 4, 5],\n"
     "          [6, 0, 1, 2, 3, 4]]],\n"
     "\n"
     "\n"
     "        [[[5, 6, 0, 1, 2, 3],\n"
     "          [4, 5, 6, 0, 1, 2],\n"
     "          [3, 4, 5, 6, 0, 1],\n"
     "          [2, 3, 4, 5, 6, 0],\n"
     "          [1, 2, 3, 4, 5, 6],\n"
     "          [0, 1, 2, 3, 4, 5]],\n"
     "\n"
     "         [[6, 0, 1, 2, 3, 4],\n"
     "          [5, 6, 0, 1, 2, 3],\n"
     "          [4, 5, 6, 0, 1, 2],\n"
     "          [3, 4, 5, 6, 0, 1],\n"
     "          [2, 3, 4, 5, 6, 0],\n"
     "          [1, 2, 3, 4, 5, 6]],\n"
     "\n"
     "         [[0, 1, 2, 3, 4, 5],\n"
     "          [6, 0, 1, 2, 3, 4],\n"
     "          [5, 6, 0, 1, 2, 3],\n"
     "          [4, 5, 6, 0, 1, 2],\n"
     "          [3, 4, 5, 6, 0, 1],\n"
     "          [2, 3, 4, 5, 6, 0]],\n"
     "\n"
     "         [[1, 2, 3, 4, 5, 6],\n"
     "          [0, 1, 2, 3, 4, 5],\n"
     "          [6, 0, 1, 2, 3, 4],\n"
     "          [5, 6, 0, 1, 2, 3],\n"
     "          [4, 5, 6, 0, 1, 2],\n"
     "          [3, 4, 5, 6, 0, 1]],\n"
     "\n"
     "         [[2, 3, 4, 5, 6, 0],\n"
     "          [1, 2, 3, 4, 5, 6],\n"
     "          [0, 1, 2, 3, 4, 5],\n"
     "          [6, 0, 1, 2, 3, 4],\n"
     "          [5, 6, 0, 1, 2, 3],\n"
     "          [4, 5, 6, 0, 1, 2]],\n"
     "\n"
     "         [[3, 4, 5, 6, 0, 1],\n"
     "          [2, 3, 4, 5, 6, 0],\n"
     "          [1, 2, 3, 4, 5, 6],\n"
     "          [0, 1, 2, 3, 4, 5],\n"
     "          [6, 0, 1, 2, 3, 4],\n"
     "          [5, 6, 0, 1, 2, 3]]],\n"
     "\n"
     "\n"
     "        [[[4, 5, 6, 0, 1, 2],\n"
     "          [3, 4, 5, 6, 0, 1],\n"
     "          [2, 3, 4, 5, 6, 0],\n"
     "          [1, 2, 3, 4, 5, 6],\n"
     "          [0, 1, 2, 3, 4, 5],\n"
     "          [6, 0, 1, 2, 3, 4]],\n"
     "\n"
     "         [[5, 6, 0, 1, 2, 3],\n"
     "          [4, 5, 6, 0, 1, 2],\n"
     "          [3, 4, 5, 6, 0, 1],\n"
     "          [2, 3, 4, 5, 6, 0],\n"
     "          [1, 2, 3, 4, 5, 6],\n"
     "          [0, 1, 2, 3, 4, 5]],\n"
     "\n"
     "         [[6, 0, 1, 2, 3, 4],\n"
     "          [5, 6, 0, 1, 2, 3],\n"
     "          [4, 5, 6, 0, 1, 2],\n"
     "          [3, 4, 5, 6, 0, 1],\n"
     "          [2, 3, 4, 5, 6, 0],\n"
     "          [1, 2, 3, 4, 5, 6]],\n"
     "\n"
     "         [[0, 1, 2, 3, 4, 5],\n"
     "          [6, 0, 1, 2, 3, 4],\n"
     "          [5, 6, 0, 1, 2, 3],\n"
     "          [4, 5, 6, 0, 1, 2],\n"
     "          [3, 4, 5, 6, 0, 1],\n"
     "          [2, 3, 4, 5, 6, 0]],\n"
     "\n"
     "         [[1, 2, 3, 4, 5, 6],\n"
     "          [0, 1, 2, 3, 4, 5],\n"
     "          [6, 0, 1, 2, 3, 4],\n"
     "          [5, 6, 0, 1, 2, 3],\n"
     "          [4, 5, 6, 0, 1, 2],\n"
     "          [3, 4, 5, 6, 0, 1]],\n"
     "\n"
     "         [[2, 3, 4, 5, 6, 0],\n"
     "          [1, 2, 3, 4, 5, 6],\n"
     "          [0, 1, 2, 3, 4, 5],\n"
     "          [6, 0, 1, 2, 3, 4],\n"
     "          [5, 6, 0, 1, 2, 3],\n"
     "          [4, 5, 6, 0, 1, 2]]],\n"
     "\n"
     "\n"
     "        [[[3, 4, 5, 6, 0, 1],\n"
     "          [2, 3, 4, 5, 6, 0],\n"
     "          [1, 2, 3, 4, 5, 6],\n"
     "          [0, 1, 2, 3, 4, 5],\n"
     "          [6, 0, 1, 2, 3, 4],\n"
     "          [5, 6, 0, 1, 2, 3]],\n"
     "\n"
     "         [[4, 5, 6, 0, 1, 2],\n"
     "          [3, 4, 5, 6, 0, 1],\n"
     "          [2, 3, 4, 5, 6, 0],\n"
     "          [1, 2, 3, 4, 5, 6],\n"
     "          [0, 1, 2, 3, 4, 5],\n"
     "          [6, 0, 1, 2, 3, 4]],\n"
     "\n"
     "         [[5, 6, 0, 1, 2, 3],\n"
     "          [4, 5, 6, 0, 1, 2],\n"
     "          [3, 4, 5, 6, 0, 1],\n"
     "          [2, 3, 4, 5, 6, 0],\n"
     "          [1, 2, 3, 4, 5, 6],\n"
     "          [0, 1, 2, 3, 4, 5]],\n"
     "\n"
     "         [[6, 0, 1, 2, 3, 4],\n"
     "          [5, 6, 0, 1, 2, 3],\n"
     "          [4, 5, 6, 0, 1, 2],\n"
     "          [3, 4, 5, 6, 0, 1],\n"
     "          [2, 3, 4, 5, 6, 0],\n"
     "          [1, 2, 3, 4, 5, 6]],\n"
     "\n"
     "         [[0, 1, 2, 3, 4, 5],\n"
     "          [6, 0, 1, 2, 3, 4],\n"
     "          [5, 6, 0, 1, 2, 3],\n"
     "          [4, 5, 6, 0, 1, 2],\n"
     "          [3, 4, 5, 6, 0, 1],\n"
     "          [2, 3, 4, 5, 6, 0]],\n"
     "\n"
     "         [[1, 2, 3, 4, 5, 6],\n"
     "          [0, 1, 2, 3, 4, 5],\n"
     "          [6, 0, 1, 2, 3, 4],\n"
     "          [5, 6, 0, 1, 2, 3],\n"
     "          [4, 5, 6, 0, 1, 2],\n"
     "          [3, 4, 5, 6, 0, 1]]],\n"
     "\n"
     "\n"
     "        [[[2, 3, 4, 5, 6, 0],\n"
     "          [1, 2, 3, 4, 5, 6],\n"
     "          [0, 1, 2, 3, 4, 5],\n"
     "          [6, 0, 1, 2, 3, 4],\n"
     "          [5, 6, 0, 1, 2, 3],\n"
     "          [4, 5, 6, 0, 1, 2]],\n"
     "\n"
     "         [[3, 4, 5, 6, 0, 1],\n"
     "          [2, 3, 4, 5, 6, 0],\n"
     "          [1, 2, 3, 4, 5, 6],\n"
     "          [0, 1, 2, 3, 4, 5],\n"
     "          [6, 0, 1, 2, 3, 4],\n"
     "          [5, 6, 0, 1, 2, 3]],\n"
     "\n"
     "         [[4, 5, 6, 0, 1, 2],\n"
     "          [3, 4, 5, 6, 0, 1],\n"
     "          [2, 3, 4, 5, 6, 0],\n"
     "          [1, 2, 3, 4, 5, 6],\n"
     "          [0, 1, 2, 3, 4, 5],\n"
     "          [6, 0, 1, 2, 3, 4]],\n"
     "\n"
     "         [[5, 6, 0, 1, 2, 3],\n"
     "          [4, 5, 6, 0, 1, 2],\n"
     "          [3, 4, 5, 6, 0, 1],\n"
     "          [2, 3, 4, 5, 6, 0],\n"
     "          [1, 2, 3, 4, 5, 6],\n"
     "          [0, 1, 2, 3, 4, 5]],\n"
     "\n"
     "         [[6, 0, 1, 2, 3, 4],\n"
     "          [5, 6, 0, 1, 2, 3],\n"
     "          [4, 5, 6, 0, 1, 2],\n"
     "          [3, 4, 5, 6, 0, 1],\n"
     "          [2, 3, 4, 5, 6, 0],\n"
     "          [1, 2, 3, 4, 5, 6]],\n"
     "\n"
     "         [[0, 1, 2, 3, 4, 5],\n"
     "          [6, 0, 1, 2, 3, 4],\n"
     "          [5, 6, 0, 1, 2, 3],\n"
     "          [4, 5, 6, 0, 1, 2],\n"
     "          [3, 4, 5, 6, 0, 1],\n"
     "          [2, 3, 4, 5, 6, 0]]]], dtype=int32, shape=(6, 6, 6, 6))"},
    {"summary decides the format on shown values only",
     [] {
       return fx::to_string(
           generated<double>({2000}, [](fx::index_t i) { return i == 0 ? 1e-9 : i == 1999 ? 2.0 : 0.5; }));
     },
     "tensor([1.e-09, 5.e-01, 5.e-01, ..., 5.e-01, 5.e-01, 2.e+00],\n"
     "       dtype=float64, shape=(2000,))"},
    {"empty vector",
     [] { return fx::to_string(fx::zeros<float>({0})); },
     "tensor([], dtype=float32, shape=(0,))"},
    {"empty matrix",
     [] { return fx::to_string(fx::zeros<std::int32_t>({2, 0})); },
     "tensor([], dtype=int32, shape=(2, 0))"},
    {"wide scientific values wrap",
     [] {
       return fx::to_string(fx::from_vector(std::vector<double>{
           123456.125, -98765.5, 3.25, 0.0625, 1.5
       }, fx::shape{5}));
     },
     "tensor([ 1.23456125e+05, -9.87655000e+04,  3.25000000e+00,\n"
     "         6.25000000e-02,  1.50000000e+00], dtype=float64, shape=(5,))"},
    {"the tail moves to a new line when the last line is full",
     [] { return fx::to_string(fx::arange<float>(10)); },
     "tensor([0., 1., 2., 3., 4., 5., 6., 7., 8., 9.],\n"
     "       dtype=float32, shape=(10,))"},
    {"the tail moves after a wrapped row too",
     [] { return fx::to_string(fx::arange(11)); },
     "tensor([ 0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10],\n"
     "       dtype=int32, shape=(11,))"},
};

}  // namespace

TEST_CASE("tensors print as NumPy prints arrays") {
  for (const auto& c : print_cases) {
    CAPTURE(c.name);
    CHECK(c.print() == c.expected);
  }
}

TEST_CASE("operator<< prints tensors and materializes expressions") {
  fx::tensor<float> x = {{1.f, 2.f}, {3.f, 4.f}};
  std::ostringstream os;
  os << x;
  CHECK(os.str() == fx::to_string(x));
  CHECK(os.str() == "tensor([[1., 2.],\n        [3., 4.]], dtype=float32, shape=(2, 2))");

  std::ostringstream expr;
  expr << x * x + 1.f;
  CHECK(expr.str() == "tensor([[ 2.,  5.],\n        [10., 17.]], dtype=float32, shape=(2, 2))");
  CHECK(fx::to_string(x > 2.f) == "tensor([[False, False],\n        [ True,  True]], dtype=bool, shape=(2, 2))");
  CHECK(fx::to_string(fx::reduce_sum(x)) == "tensor(10., dtype=float32, shape=())");
}

TEST_CASE("print: none, a tape's gradient for an unconnected source, prints as none") {
  CHECK(fx::to_string(fx::tensor<float>::none()) == "tensor(none, dtype=float32)");
  CHECK(fx::to_string(fx::tensor<double>::none()) == "tensor(none, dtype=float64)");
  CHECK(fx::to_string(fx::tensor<float>()) == "tensor([], dtype=float32, shape=(0,))");  // empty, not none
}
