"""What a paper built on a study cites, and the BibTeX of each: roarfast itself and the ROAR paper always, and the
papers of the estimators and fills the study ran, as their records declare them (an estimator's and a fill's
`cites`: never guessed from a name). references.bib holds exactly the entries methods.tex cites.
"""

from roarfast.fills import FILLS
from roarfast.methods.declaration import ESTIMATORS
from roarfast.version import __version__

#: what every paper from a study cites: the benchmark's paper and the program that ran it
ALWAYS = ("hooker2019benchmark", "roarfast")

#: the BibTeX entry of each key a record may cite (the facts of each paper: authors, title, venue, year)
BIBTEX = {
    "roarfast": f"""@misc{{roarfast,
  author = {{{{The roarfast authors}}}},
  title = {{roarfast: {{ROAR}}, end to end, fast}},
  note = {{Python package, version {__version__}}}
}}""",
    "hooker2019benchmark": """@inproceedings{hooker2019benchmark,
  author = {Sara Hooker and Dumitru Erhan and Pieter-Jan Kindermans and Been Kim},
  title = {A Benchmark for Interpretability Methods in Deep Neural Networks},
  booktitle = {Advances in Neural Information Processing Systems 32 (NeurIPS)},
  year = {2019}
}""",
    "simonyan2014deep": """@inproceedings{simonyan2014deep,
  author = {Karen Simonyan and Andrea Vedaldi and Andrew Zisserman},
  title = {Deep Inside Convolutional Networks: Visualising Image Classification Models and Saliency Maps},
  booktitle = {International Conference on Learning Representations (ICLR), Workshop Track},
  year = {2014}
}""",
    "smilkov2017smoothgrad": """@misc{smilkov2017smoothgrad,
  author = {Daniel Smilkov and Nikhil Thorat and Been Kim and Fernanda Vi{\\'e}gas and Martin Wattenberg},
  title = {{SmoothGrad}: removing noise by adding noise},
  howpublished = {arXiv:1706.03825},
  year = {2017}
}""",
    "sundararajan2017axiomatic": """@inproceedings{sundararajan2017axiomatic,
  author = {Mukund Sundararajan and Ankur Taly and Qiqi Yan},
  title = {Axiomatic Attribution for Deep Networks},
  booktitle = {Proceedings of the 34th International Conference on Machine Learning (ICML)},
  year = {2017}
}""",
    "springenberg2015striving": """@inproceedings{springenberg2015striving,
  author = {Jost Tobias Springenberg and Alexey Dosovitskiy and Thomas Brox and Martin Riedmiller},
  title = {Striving for Simplicity: The All Convolutional Net},
  booktitle = {International Conference on Learning Representations (ICLR), Workshop Track},
  year = {2015}
}""",
    "selvaraju2017gradcam": """@inproceedings{selvaraju2017gradcam,
  author = {Ramprasaath R. Selvaraju and Michael Cogswell and Abhishek Das and Ramakrishna Vedantam and Devi Parikh
            and Dhruv Batra},
  title = {{Grad-CAM}: Visual Explanations from Deep Networks via Gradient-Based Localization},
  booktitle = {IEEE International Conference on Computer Vision (ICCV)},
  year = {2017}
}""",
    "adebayo2018local": """@inproceedings{adebayo2018local,
  author = {Julius Adebayo and Justin Gilmer and Ian Goodfellow and Been Kim},
  title = {Local Explanation Methods for Deep Neural Networks Lack Sensitivity to Parameter Values},
  booktitle = {International Conference on Learning Representations (ICLR), Workshop Track},
  year = {2018}
}""",
    "rong2022consistent": """@inproceedings{rong2022consistent,
  author = {Yao Rong and Tobias Leemann and Vadim Borisov and Gjergji Kasneci and Enkelejda Kasneci},
  title = {A Consistent and Efficient Evaluation Strategy for Attribution Methods},
  booktitle = {Proceedings of the 39th International Conference on Machine Learning (ICML)},
  year = {2022}
}""",
}


def estimator_cites(method: str) -> tuple:
    """The keys an estimator's record cites (one this process knows: a built-in or one registered here; a name
    from the run directory imports nothing)."""
    return ESTIMATORS.load(method).cites if method in ESTIMATORS else ()


def fill_cites(fill: str) -> tuple:
    return FILLS.load(fill).cites if fill in FILLS else ()


def bibtex(keys) -> str:
    """references.bib: the entries of `keys`, in their order, each once."""
    return "\n\n".join(BIBTEX[key] for key in dict.fromkeys(keys)) + "\n"
