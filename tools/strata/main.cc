// The `strata` program: subcommands train, bench, launch, topology, tfrecord, demo.
// Usage errors print a one-line message and the usage to stderr and exit 2;
// runtime errors print "strata: <CODE>: <message>" and exit 1.
#include <CLI/CLI.hpp>

#include <iostream>
#include <string>
#include <vector>

#include "strata/strata.h"
#include "tools/strata/bench_command.h"
#include "tools/strata/flag_checks.h"
#include "tools/strata/launch.h"
#include "tools/strata/tfrecord_command.h"
#include "tools/strata/topology_command.h"
#include "tools/strata/train_command.h"

namespace {

int run_demo() {
  for (const auto& d : strata::config::list_logical_devices("CPU")) {
    std::cout << "device: " << d.name << "\n";
  }
  strata::Tensor t = strata::constant({1.f, 2.f, 3.f, 4.f}, {2, 2});
  std::cout << t << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Strata: TensorFlow's tf.distribute system, native in C++20", "strata"};
  app.require_subcommand(0, 1);

  CLI::App* demo = app.add_subcommand("demo", "Print the local devices and a tensor");

  strata::tools::TrainOptions train_options;
  CLI::App* train = strata::tools::add_train_command(app, train_options);

  strata::tools::LaunchOptions launch_options;
  CLI::App* launch = app.add_subcommand(
      "launch", "Start N local worker processes with TF_CONFIG on free loopback ports");
  launch->add_option("--nproc", launch_options.nproc, "Number of worker processes")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  launch
      ->add_option("--devices-per-worker", launch_options.devices_per_worker,
                   "Logical CPU devices per worker (0 = the program's own choice)")
      ->capture_default_str()
      ->check(strata::tools::whole_in(0, strata::config::max_cpu_threads()));
  launch
      ->add_option("--grace-seconds", launch_options.grace_seconds,
                   "Seconds between SIGTERM and SIGKILL when stopping workers")
      ->capture_default_str()
      ->check(strata::tools::finite_in(0, 3600));
  launch->add_option("command", launch_options.command, "-- PROGRAM ARGS...")->required();
  launch->prefix_command(false);

  strata::tools::TopologyOptions topology_options;
  CLI::App* topology = app.add_subcommand(
      "topology", "Print the local TPU system's mesh and a device assignment as grids");
  topology
      ->add_option("--tpu-topology", topology_options.tpu_topology,
                   "Mesh shape XxYxZxC (default: from STRATA_TPU_TOPOLOGY or the devices)")
      ->envname("STRATA_TPU_TOPOLOGY");
  topology
      ->add_option("--devices", topology_options.devices,
                   "Logical devices to assume (default: this machine's)")
      ->check(strata::tools::whole_in(0, strata::config::max_cpu_threads()));
  topology
      ->add_option("--computation-shape", topology_options.computation_shape,
                   "Cores of one replica in x,y,z,core, e.g. 1,1,1,2")
      ->delimiter(',')
      ->expected(4)
      ->check(strata::tools::whole_in(1, strata::config::max_cpu_threads()));
  topology
      ->add_option("--computation-stride", topology_options.computation_stride,
                   "Spacing of a replica's cores in x,y,z,core")
      ->delimiter(',')
      ->expected(4)
      ->check(strata::tools::whole_in(1, strata::config::max_cpu_threads()));
  topology
      ->add_option("--num-replicas", topology_options.num_replicas,
                   "Replicas (default: as many as fit)")
      ->check(strata::tools::whole_in(0, strata::config::max_cpu_threads()));

  CLI::App* tfrecord = app.add_subcommand("tfrecord", "Convert, inspect and verify TFRecord files");
  tfrecord->require_subcommand(1);
  strata::tools::ConvertIdxOptions convert_options;
  CLI::App* convert = tfrecord->add_subcommand(
      "convert-idx",
      "IDX images + labels -> TFRecord files of tf.Examples (image bytes, label int64)");
  convert->add_option("images", convert_options.images, "IDX images file (optionally gzipped)")
      ->required();
  convert->add_option("labels", convert_options.labels, "IDX labels file")->required();
  convert->add_option("out", convert_options.out, "Output path (a prefix when --shards > 1)")
      ->required();
  convert->add_option("--shards", convert_options.shards, "Number of output files")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  convert->add_option("--compression", convert_options.compression, "'', ZLIB or GZIP")
      ->check(CLI::IsMember({"", "ZLIB", "GZIP"}));
  std::string inspect_file, compression = "auto";
  int inspect_limit = 10;
  CLI::App* inspect =
      tfrecord->add_subcommand("inspect", "Print records, decoding tf.Example features");
  inspect->add_option("file", inspect_file, "TFRecord file")->required();
  inspect->add_option("--limit", inspect_limit, "Records to show (0 = all)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 30));
  inspect->add_option("--compression", compression, "auto, '', ZLIB or GZIP")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "", "ZLIB", "GZIP"}));
  std::vector<std::string> verify_files;
  CLI::App* verify = tfrecord->add_subcommand("verify", "Check every record's checksums");
  verify->add_option("files", verify_files, "TFRecord files")->required();
  verify->add_option("--compression", compression, "auto, '', ZLIB or GZIP")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "", "ZLIB", "GZIP"}));

  strata::tools::BenchOptions bench_options;
  CLI::App* bench = app.add_subcommand(
      "bench", "Run the benchmark programs and the installed peers; print figure, peer and ratio");
  bench->add_flag("--quick", bench_options.quick,
                  "Short runs: a couple of minutes (min time 0.05 s, 1 repetition, short peers)");
  bench
      ->add_option("--bench-dir", bench_options.bench_dir,
                   "Folder of the *_bench programs (default: build/bench beside this program)")
      ->check(CLI::ExistingDirectory);
  bench
      ->add_option("--peers-dir", bench_options.peers_dir,
                   "Folder of the peer scripts (default: bench/peers)")
      ->check(CLI::ExistingDirectory);
  bench->add_option("--filter", bench_options.filter,
                    "Only benchmarks matching this regex (--benchmark_filter)");
  bench->add_option("--out", bench_options.out,
                    "Also write the table and every figure as JSON here");
  bench
      ->add_option("--write-docs", bench_options.write_docs,
                   "Regenerate the marked section of this Markdown file (docs/PERFORMANCE.md)")
      ->check(CLI::ExistingFile);
  bench->add_option("--python", bench_options.python,
                    "Python with torch for the peers (default: $STRATA_BENCH_PYTHON, else "
                    "/usr/bin/python3)");
  bench->add_option("--repetitions", bench_options.repetitions, "Repetitions per figure (median)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "strata: " << e.what() << "\n\n" << app.help();
    return 2;
  }

  try {
    if (train->parsed()) {
      try {
        strata::tools::validate_train_options(train_options);
      } catch (const strata::InvalidArgumentError& e) {
        std::cerr << "strata: " << e.what() << "\n\n" << train->help("strata");
        return 2;
      }
      return strata::tools::run_train(train_options);
    }
    if (bench->parsed()) return strata::tools::run_bench(bench_options);
    if (launch->parsed()) return strata::tools::run_launch(launch_options);
    if (convert->parsed()) {
      strata::tools::convert_idx(convert_options, std::cout);
      return 0;
    }
    if (inspect->parsed()) {
      strata::tools::inspect_tfrecord(inspect_file, inspect_limit, compression, std::cout);
      return 0;
    }
    if (verify->parsed())
      return strata::tools::verify_tfrecords(verify_files, compression, std::cout) == 0 ? 0 : 1;
    if (topology->parsed()) {
      std::cout << strata::tools::run_topology(topology_options);
      return 0;
    }
    if (demo->parsed() || app.get_subcommands().empty()) return run_demo();
  } catch (const strata::InvalidArgumentError& e) {
    std::cerr << "strata: " << e.what() << "\n";
    return 2;
  } catch (const strata::Error& e) {
    std::cerr << "strata: " << strata::error_code_name(e.code()) << ": " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "strata: internal error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
