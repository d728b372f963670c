// Loads a TensorFlow.js LayersModel from a directory with tf.loadLayersModel
// and prints its predictions, so that tests/tfjs/tfjs_test.cc can compare them
// with Strata's.
//
//   node predict.js <model dir> <input.json> <output.json>
//
// input.json: {"shape": [n, ...], "values": [...]} (float32, row-major).
// output.json: {"shape": [...], "values": [...], "backend": "cpu",
//               "class_name": ..., "layers": [...]}.
//
// Plain @tensorflow/tfjs has no file:// loader in Node.js (that is
// tfjs-node's), so an IOHandler reads model.json and hands it to
// tf.io.getModelArtifactsForJSON, TensorFlow.js's own reader of the
// model.json format, whose callback reads each weight group's shard files
// (in the manifest's order) and concatenates them, as tf.io.http would.
'use strict';

const fs = require('fs');
const path = require('path');
const tf = require('@tensorflow/tfjs');

function directoryHandler(dir) {
  return {
    async load() {
      const modelJSON = JSON.parse(fs.readFileSync(path.join(dir, 'model.json'), 'utf8'));
      return tf.io.getModelArtifactsForJSON(modelJSON, async (weightsManifest) => {
        const specs = [];
        const buffers = [];
        for (const group of weightsManifest) {
          for (const p of group.paths) buffers.push(fs.readFileSync(path.join(dir, p)));
          specs.push(...group.weights);
        }
        const all = Buffer.concat(buffers);
        const data = all.buffer.slice(all.byteOffset, all.byteOffset + all.byteLength);
        return [specs, data];
      });
    },
  };
}

async function main() {
  const [dir, inputPath, outputPath] = process.argv.slice(2);
  if (!dir || !inputPath || !outputPath) {
    throw new Error('usage: node predict.js <model dir> <input.json> <output.json>');
  }
  await tf.setBackend('cpu');
  await tf.ready();
  // strict: every weight of the manifest must belong to the model and every
  // weight of the model must be in the manifest.
  const model = await tf.loadLayersModel(directoryHandler(dir), {strict: true});
  const input = JSON.parse(fs.readFileSync(inputPath, 'utf8'));
  const x = tf.tensor(input.values, input.shape, 'float32');
  const y = model.predict(x);
  const out = {
    shape: y.shape,
    values: Array.from(await y.data()),
    backend: tf.getBackend(),
    version: tf.version.tfjs,
    class_name: model.getClassName(),
    layers: model.layers.map((l) => l.getClassName()),
  };
  fs.writeFileSync(outputPath, JSON.stringify(out));
}

main().catch((e) => {
  process.stderr.write(`predict.js: ${e.stack || e}\n`);
  process.exit(1);
});
