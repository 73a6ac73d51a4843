// fx::state_fields: the named scalars an object keeps from one epoch to the next (a callback's best
// value and counts), which fx::checkpoint saves and restores for any object with a member
//
//   fx::state_fields checkpoint_state();
//
// as it does models and optimizers, so that a resumed run goes on where the saved one was:
//
//   fx::reduce_lr_on_plateau plateau{opt, {.patience = 3}};
//   fx::checkpoint ckpt{{"model", net}, {"optimizer", opt}, {"plateau", plateau}};
//
// fx::reduce_lr_on_plateau and fx::early_stopping have one (PyTorch's schedulers' state_dict()); a
// program's own callback can too. In the file, each real is `<object>/<name>` (an F64 scalar), each
// integer an I64 scalar, and each label the metadata `<object>/<name>`. restore() checks, before it
// assigns anything: that every label is the program's (a best loss saved while watching val_loss
// means nothing to a callback that now watches accuracy), that no real is NaN, and that every
// integer is in [minimum, INT_MAX]; then it assigns the values and calls `restored`.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace fluxion {

struct state_fields {
  struct real {
    std::string name;
    double* value;
    /// The object keeps the value's negative (a callback that watches an accuracy keeps the best
    /// as a loss, to minimize): the file holds the value itself, as the user reads it.
    bool negated = false;
  };
  struct integer {
    std::string name;
    int* value;
    int minimum = 0;
  };
  std::vector<real> reals = {};
  std::vector<integer> integers = {};
  /// Text that must be the same in the file and the program (what a callback watches).
  std::vector<std::pair<std::string, std::string>> labels = {};
  /// Called after a restore assigned the values (a callback then keeps them when a resumed fit begins).
  std::function<void()> restored = {};
};

}  // namespace fluxion
