/**
 * Expected numbers for the protocol test, derived by hand from the layer's shape (never from the
 * server's code), and the server's documented number format: three significant digits with an
 * SI prefix (k, M, G) and the unit, e.g. 388800 FLOPs -> "389 kFLOPs".
 */

export interface Conv2dShape {
  inChannels: number;
  outChannels: number;
  kernel: number;
  height: number;
  width: number;
}

/** Parameters, MACs and module FLOPs of a Conv2d with bias, stride 1, no padding, batch 1. */
export function conv2dCost(shape: Conv2dShape): {
  parameters: number;
  macs: number;
  flops: number;
  outputShape: number[];
} {
  const perOutput = shape.inChannels * shape.kernel * shape.kernel;
  const outputShape = [shape.outChannels, shape.height - shape.kernel + 1, shape.width - shape.kernel + 1];
  const outputs = outputShape[0] * outputShape[1] * outputShape[2];
  return {
    outputShape,
    parameters: shape.outChannels * perOutput + shape.outChannels,
    macs: outputs * perOutput,
    // perOutput multiplications, perOutput - 1 additions, one bias addition.
    flops: outputs * (2 * perOutput - 1 + 1),
  };
}

/** `value` with three significant digits, an SI prefix and `unit`: formatCount(388800, 'FLOPs') -> '389 kFLOPs'. */
export function formatCount(value: number, unit: string): string {
  const prefixes = ['', 'k', 'M', 'G', 'T'];
  let index = 0;
  let scaled = value;
  while (scaled >= 999.5 && index < prefixes.length - 1) {
    scaled /= 1000;
    index += 1;
  }
  const text = index === 0 && Number.isInteger(scaled) ? String(scaled) : scaled.toPrecision(3);
  return `${text} ${prefixes[index]}${unit}`;
}
