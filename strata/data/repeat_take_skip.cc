// repeat, take and skip: transformations that count elements.
#include "strata/data/dataset.h"

#include "strata/base/errors.h"
#include "strata/data/internal/node.h"
#include "strata/data/internal/state_io.h"
#include "strata/data/internal/transform_util.h"

namespace strata::data {

using internal::input_iter;
using internal::IteratorImpl;
using internal::make_dataset;
using internal::make_fn_iterator;
using internal::StateReader;
using internal::StateWriter;

Dataset Dataset::repeat(int64_t count) const {
  STRATA_CHECK_ARG(count >= -1, "repeat: expected count >= -1, got ", count);
  return make_dataset(
      NodeKind::kRepeat, {*this}, element_spec(),
      [count](const std::vector<Dataset>& inputs) {
        struct State {
          Dataset ds;
          std::shared_ptr<IteratorImpl> it;
          int64_t done = 0;
          bool produced = false;
        };
        auto st = std::make_shared<State>(State{inputs[0], nullptr, 0, false});
        return make_fn_iterator(
            [st, count]() -> std::optional<Element> {
              while (count == -1 || st->done < count) {
                if (!st->it) {
                  st->it = input_iter(st->ds);
                  st->produced = false;
                }
                if (auto e = st->it->next()) {
                  st->produced = true;
                  return e;
                }
                ++st->done;
                // TF: an input that is empty in a pass ends the repetition (no spin).
                if (!st->produced) {
                  st->it.reset();
                  return std::nullopt;
                }
                // The next pass: the same iterator started over where it can
                // (a source), as a fresh one otherwise.
                if (st->it->rewind()) {
                  st->produced = false;
                } else {
                  st->it.reset();
                }
              }
              return std::nullopt;
            },
            [st](StateWriter& w, std::vector<Element>&) {
              w.write_int("done", st->done);
              w.write_int("produced", st->produced ? 1 : 0);
              w.write_int("in_pass", st->it ? 1 : 0);
              if (st->it) w.save_input("input", *st->it);
            },
            [st](StateReader& r) {
              st->done = r.read_int("done");
              st->produced = r.read_int("produced") != 0;
              st->it.reset();
              if (r.read_int("in_pass") != 0) {
                st->it = input_iter(st->ds);
                r.restore_input("input", *st->it);
              }
            });
      },
      [count](const std::vector<Dataset>& in) {
        return internal::repeat_cardinality(in[0].cardinality(), count);
      });
}

Dataset Dataset::take(int64_t count) const {
  STRATA_CHECK_ARG(count >= -1, "take: expected count >= -1, got ", count);
  return make_dataset(
      NodeKind::kTake, {*this}, element_spec(),
      [count](const std::vector<Dataset>& inputs) {
        auto in = input_iter(inputs[0]);
        auto n = std::make_shared<int64_t>(0);
        return make_fn_iterator(
            [in, n, count]() -> std::optional<Element> {
              if (count != -1 && *n >= count) return std::nullopt;
              ++*n;
              return in->next();
            },
            [in, n](StateWriter& w, std::vector<Element>&) {
              w.write_int("taken", *n);
              w.save_input("input", *in);
            },
            [in, n](StateReader& r) {
              *n = r.read_int("taken");
              r.restore_input("input", *in);
            });
      },
      [count](const std::vector<Dataset>& in) {
        return internal::take_cardinality(in[0].cardinality(), count);
      });
}

Dataset Dataset::skip(int64_t count) const {
  STRATA_CHECK_ARG(count >= -1, "skip: expected count >= -1, got ", count);
  return make_dataset(
      NodeKind::kSkip, {*this}, element_spec(),
      [count](const std::vector<Dataset>& inputs) {
        auto in = input_iter(inputs[0]);
        auto skipped = std::make_shared<bool>(false);
        return make_fn_iterator(
            [in, skipped, count]() -> std::optional<Element> {
              if (!*skipped) {
                *skipped = true;
                for (int64_t i = 0; count == -1 || i < count; ++i)
                  if (!in->next()) return std::nullopt;
              }
              return in->next();
            },
            [in, skipped](StateWriter& w, std::vector<Element>&) {
              w.write_int("skipped", *skipped ? 1 : 0);
              w.save_input("input", *in);
            },
            [in, skipped](StateReader& r) {
              *skipped = r.read_int("skipped") != 0;
              r.restore_input("input", *in);
            });
      },
      [count](const std::vector<Dataset>& in) {
        return internal::skip_cardinality(in[0].cardinality(), count);
      });
}

}  // namespace strata::data
