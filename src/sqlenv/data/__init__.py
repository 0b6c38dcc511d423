"""Data: question records, loaders (Spider layout, bring-your-own), presets and their cache."""

from sqlenv.data.dataset import Dataset
from sqlenv.data.loaders import DataError
from sqlenv.data.presets import PRESETS, load_dataset
from sqlenv.data.records import QuestionRecord

__all__ = ["PRESETS", "DataError", "Dataset", "QuestionRecord", "load_dataset"]
