#pragma once
// Training curves for `strata train --plot FILE`, drawn with PLplot (Debian's
// libplplot-dev; PNG needs its cairo driver, plplot-driver-cairo).
//
//   strata::tools::plot_training_curves({0, 1, 2}, history.history, "curves.svg");
//
// The figure has two panels side by side: loss (train "loss" and validation
// "val_loss") and accuracy ("accuracy", "val_accuracy") per epoch, numbered
// from 1 as Keras's progress bar does. Missing series are left out.
//
// Thread-safety: PLplot keeps process-wide state; call from one thread at a time.

#include <map>
#include <string>
#include <vector>

namespace strata::tools {

// "svg" or "png" from the file's extension (case-insensitive); throws
// InvalidArgumentError naming the path for anything else.
std::string plot_format(const std::string& path);

// Throws what plot_training_curves would throw before drawing: a bad extension
// (InvalidArgumentError), a missing PLplot driver (UnimplementedError saying
// which package provides it), a missing folder (NotFoundError). For checking
// --plot before a long training run.
void check_can_plot(const std::string& path);

// Draws the curves of `history` (name -> one value per epoch in `epochs`) to
// `path`, atomically (a temporary file in the same folder, then rename).
// The errors of check_can_plot, InvalidArgumentError for no epochs,
// InternalError if PLplot drew nothing, and the write's errors (a full disk:
// ResourceExhaustedError "... No space left on device (ENOSPC)"; the target is
// then untouched and no temporary file stays).
void plot_training_curves(const std::vector<int>& epochs,
                          const std::map<std::string, std::vector<double>>& history,
                          const std::string& path);

}  // namespace strata::tools
