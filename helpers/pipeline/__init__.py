"""The image-classification pipeline the lessons teach from: data, features, models, training, inference, serving."""
