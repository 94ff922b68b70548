from circular_a import HEIGHT  # the cycle

WIDTH = 4 * HEIGHT
