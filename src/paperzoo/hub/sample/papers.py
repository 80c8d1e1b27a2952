"""Writes arxiv.jsonl: the bundled sample of arXiv records, in the metadata snapshot's JSON-lines format.

Ids, titles, authors, categories and first-version dates were typed in for this sample; each ``abstract`` is a
one-line summary written for the sample, not the paper's abstract (ingest the real record from arXiv to replace it:
a later version, or the same version with other fields, updates the row). Run: python -m paperzoo.hub.sample.papers
"""

import json
from pathlib import Path

# id, title, authors, categories, v1 date (RFC 2822), summary written for the sample
PAPERS = [
    ("1801.04381", "MobileNetV2: Inverted Residuals and Linear Bottlenecks",
     "Mark Sandler, Andrew Howard, Menglong Zhu, Andrey Zhmoginov, Liang-Chieh Chen", "cs.CV",
     "Sat, 13 Jan 2018 00:00:00 GMT", "A mobile convolutional network built from inverted residual blocks with "
     "linear bottlenecks and depthwise convolutions."),
    ("2003.10555", "ELECTRA: Pre-training Text Encoders as Discriminators Rather Than Generators",
     "Kevin Clark, Minh-Thang Luong, Quoc V. Le, Christopher D. Manning", "cs.CL",
     "Mon, 23 Mar 2020 00:00:00 GMT", "Pre-training a text encoder to detect tokens replaced by a small generator, "
     "learning from every position instead of the masked ones only."),
    ("2103.03206", "Perceiver: General Perception with Iterative Attention",
     "Andrew Jaegle, Felix Gimeno, Andrew Brock, Andrew Zisserman, Oriol Vinyals, Joao Carreira",
     "cs.CV cs.AI cs.LG cs.SD eess.AS", "Thu, 4 Mar 2021 00:00:00 GMT",
     "A transformer that cross-attends from a small latent array to raw inputs of any modality."),
    ("2006.03236", "Funnel-Transformer: Filtering out Sequential Redundancy for Efficient Language Processing",
     "Zihang Dai, Guokun Lai, Yiming Yang, Quoc V. Le", "cs.LG cs.CL stat.ML", "Fri, 5 Jun 2020 00:00:00 GMT",
     "An encoder that pools the sequence between blocks to save compute, with a decoder to recover token outputs."),
    ("2003.08934", "NeRF: Representing Scenes as Neural Radiance Fields for View Synthesis",
     "Ben Mildenhall, Pratul P. Srinivasan, Matthew Tancik, Jonathan T. Barron, Ravi Ramamoorthi, Ren Ng",
     "cs.CV cs.GR", "Thu, 19 Mar 2020 00:00:00 GMT",
     "A coordinate network maps position and view direction to density and colour, rendered by volume integration."),
    ("2011.12948", "Nerfies: Deformable Neural Radiance Fields",
     "Keunhong Park, Utkarsh Sinha, Jonathan T. Barron, Sofien Bouaziz, Dan B Goldman, Steven M. Seitz, "
     "Ricardo Martin-Brualla", "cs.CV cs.GR", "Wed, 25 Nov 2020 00:00:00 GMT",
     "Radiance fields of non-rigid scenes through a learned per-frame deformation into a canonical space."),
    ("2101.03961", "Switch Transformers: Scaling to Trillion Parameter Models with Simple and Efficient Sparsity",
     "William Fedus, Barret Zoph, Noam Shazeer", "cs.LG cs.AI", "Mon, 11 Jan 2021 00:00:00 GMT",
     "Mixture-of-experts layers that route each token to a single expert, with capacity and a balancing loss."),
    ("2102.09475", "Gifsplanation via Latent Shift: A Simple Autoencoder Approach to Counterfactual Generation for "
     "Chest X-rays", "Joseph Paul Cohen, Rupert Brooks, Sovann En, Evan Zucker, Anuj Pareek, Matthew P. Lungren, "
     "Akshay Chaudhari", "cs.CV eess.IV", "Thu, 18 Feb 2021 00:00:00 GMT",
     "Explaining a classifier by moving an image's autoencoder latent along the classifier's gradient."),
    ("2104.11178", "VATT: Transformers for Multimodal Self-Supervised Learning from Raw Video, Audio and Text",
     "Hassan Akbari, Liangzhe Yuan, Rui Qian, Wei-Hong Chuang, Shih-Fu Chang, Yin Cui, Boqing Gong",
     "cs.CV cs.AI cs.LG cs.MM eess.IV", "Thu, 22 Apr 2021 00:00:00 GMT",
     "Transformers on raw video, audio and text trained with contrastive losses, with DropToken for speed."),
    ("1706.03762", "Attention Is All You Need",
     "Ashish Vaswani, Noam Shazeer, Niki Parmar, Jakob Uszkoreit, Llion Jones, Aidan N. Gomez, Lukasz Kaiser, "
     "Illia Polosukhin", "cs.CL cs.LG", "Mon, 12 Jun 2017 00:00:00 GMT",
     "The Transformer: sequence transduction with attention only, no recurrence or convolution."),
    ("2102.11972", "Do Transformer Modifications Transfer Across Implementations and Applications?",
     "Sharan Narang, Hyung Won Chung, Yi Tay, William Fedus, Thibault Fevry, Michael Matena, Karishma Malkan, "
     "Noah Fiedel, Noam Shazeer, Zhenzhong Lan, Yanqi Zhou, Wei Li, Nan Ding, Jake Marcus, Adam Roberts, "
     "Colin Raffel", "cs.LG cs.CL", "Tue, 23 Feb 2021 00:00:00 GMT",
     "Many proposed Transformer changes re-tested in one codebase; few help beyond their original setting."),
    ("2103.14030", "Swin Transformer: Hierarchical Vision Transformer using Shifted Windows",
     "Ze Liu, Yutong Lin, Yue Cao, Han Hu, Yixuan Wei, Zheng Zhang, Stephen Lin, Baining Guo", "cs.CV cs.LG",
     "Thu, 25 Mar 2021 00:00:00 GMT", "A vision transformer with attention inside local windows that shift between "
     "layers, building a feature pyramid."),
    ("2012.06046", "Interactive Weak Supervision: Learning Useful Heuristics for Data Labeling",
     "Benedikt Boecking, Willie Neiswanger, Eric Xing, Artur Dubrawski", "cs.LG cs.HC stat.ML",
     "Fri, 11 Dec 2020 00:00:00 GMT", "Asking an expert which candidate labelling functions are useful, guided by a "
     "model of their usefulness, to build weak supervision faster."),
    ("1708.07747", "Fashion-MNIST: a Novel Image Dataset for Benchmarking Machine Learning Algorithms",
     "Han Xiao, Kashif Rasul, Roland Vollgraf", "cs.LG cs.CV stat.ML", "Fri, 25 Aug 2017 00:00:00 GMT",
     "Greyscale clothing images in the shape of MNIST, a harder drop-in benchmark."),
    ("1810.04805", "BERT: Pre-training of Deep Bidirectional Transformers for Language Understanding",
     "Jacob Devlin, Ming-Wei Chang, Kenton Lee, Kristina Toutanova", "cs.CL", "Thu, 11 Oct 2018 00:00:00 GMT",
     "A bidirectional Transformer encoder pre-trained by masked language modelling and fine-tuned per task."),
    ("1512.03385", "Deep Residual Learning for Image Recognition",
     "Kaiming He, Xiangyu Zhang, Shaoqing Ren, Jian Sun", "cs.CV", "Thu, 10 Dec 2015 00:00:00 GMT",
     "Very deep convolutional networks trained through identity shortcut connections."),
    ("1412.6980", "Adam: A Method for Stochastic Optimization", "Diederik P. Kingma, Jimmy Ba", "cs.LG",
     "Mon, 22 Dec 2014 00:00:00 GMT", "A first-order optimiser with per-parameter step sizes from running moment "
     "estimates of the gradient."),
    ("1711.05101", "Decoupled Weight Decay Regularization", "Ilya Loshchilov, Frank Hutter", "cs.LG cs.NE math.OC",
     "Tue, 14 Nov 2017 00:00:00 GMT", "Weight decay applied apart from the adaptive gradient step (AdamW)."),
    ("2106.09685", "LoRA: Low-Rank Adaptation of Large Language Models",
     "Edward J. Hu, Yelong Shen, Phillip Wallis, Zeyuan Allen-Zhu, Yuanzhi Li, Shean Wang, Lu Wang, Weizhu Chen",
     "cs.CL cs.AI cs.LG", "Thu, 17 Jun 2021 00:00:00 GMT",
     "Fine-tuning a frozen model through trainable low-rank updates of its weight matrices."),
    ("2006.11239", "Denoising Diffusion Probabilistic Models", "Jonathan Ho, Ajay Jain, Pieter Abbeel",
     "cs.LG stat.ML", "Fri, 19 Jun 2020 00:00:00 GMT",
     "Image generation by learning to reverse a gradual Gaussian noising process."),
    ("1502.03167", "Batch Normalization: Accelerating Deep Network Training by Reducing Internal Covariate Shift",
     "Sergey Ioffe, Christian Szegedy", "cs.LG", "Wed, 11 Feb 2015 00:00:00 GMT",
     "Normalising activations with mini-batch statistics to train deep networks faster."),
    ("1607.06450", "Layer Normalization", "Jimmy Lei Ba, Jamie Ryan Kiros, Geoffrey E. Hinton", "stat.ML cs.LG",
     "Thu, 21 Jul 2016 00:00:00 GMT", "Normalising over the features of each example instead of over the batch."),
    ("1910.07467", "Root Mean Square Layer Normalization", "Biao Zhang, Rico Sennrich", "cs.LG cs.CL stat.ML",
     "Wed, 16 Oct 2019 00:00:00 GMT", "Layer normalisation without mean centring, rescaling by the root mean square."),
    ("2002.05202", "GLU Variants Improve Transformer", "Noam Shazeer", "cs.LG cs.NE stat.ML",
     "Wed, 12 Feb 2020 00:00:00 GMT", "Gated linear unit feed-forward layers (GEGLU, SwiGLU) in the Transformer."),
    ("2104.09864", "RoFormer: Enhanced Transformer with Rotary Position Embedding",
     "Jianlin Su, Yu Lu, Shengfeng Pan, Ahmed Murtadha, Bo Wen, Yunfeng Liu", "cs.CL cs.AI cs.LG",
     "Tue, 20 Apr 2021 00:00:00 GMT",
     "Positions encoded by rotating query and key pairs by position-dependent angles."),
    ("2108.12409", "Train Short, Test Long: Attention with Linear Biases Enables Input Length Extrapolation",
     "Ofir Press, Noah A. Smith, Mike Lewis", "cs.CL", "Fri, 27 Aug 2021 00:00:00 GMT",
     "Attention scores penalised linearly with distance (ALiBi) instead of position embeddings."),
    ("2205.14135", "FlashAttention: Fast and Memory-Efficient Exact Attention with IO-Awareness",
     "Tri Dao, Daniel Y. Fu, Stefano Ermon, Atri Rudra, Christopher Ré", "cs.LG", "Fri, 27 May 2022 00:00:00 GMT",
     "Exact attention computed in tiles that stay in fast on-chip memory."),
    ("2112.10752", "High-Resolution Image Synthesis with Latent Diffusion Models",
     "Robin Rombach, Andreas Blattmann, Dominik Lorenz, Patrick Esser, Björn Ommer", "cs.CV",
     "Mon, 20 Dec 2021 00:00:00 GMT", "Diffusion in the latent space of a pretrained autoencoder, conditioned by "
     "cross-attention."),
    ("2010.11929", "An Image is Worth 16x16 Words: Transformers for Image Recognition at Scale",
     "Alexey Dosovitskiy, Lucas Beyer, Alexander Kolesnikov, Dirk Weissenborn, Xiaohua Zhai, Thomas Unterthiner, "
     "Mostafa Dehghani, Matthias Minderer, Georg Heigold, Sylvain Gelly, Jakob Uszkoreit, Neil Houlsby",
     "cs.CV cs.AI cs.LG", "Thu, 22 Oct 2020 00:00:00 GMT",
     "A plain Transformer on sequences of image patches, pretrained at scale."),
    ("hep-th/9711200", "The Large N Limit of Superconformal Field Theories and Supergravity", "Juan M. Maldacena",
     "hep-th", "Thu, 27 Nov 1997 00:00:00 GMT",
     "An old-style arXiv id in the sample: a conjectured duality between gauge theories and gravity."),
]


def main() -> None:
    out = Path(__file__).with_name("arxiv.jsonl")
    with out.open("w") as f:
        for ident, title, authors, cats, date, summary in PAPERS:
            f.write(json.dumps({"id": ident, "title": title, "authors": authors, "categories": cats,
                                "abstract": summary, "versions": [{"version": "v1", "created": date}],
                                "comments": "paperzoo bundled sample: the abstract is a summary written for it"},
                               ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
