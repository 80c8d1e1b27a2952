"""The IMDB train reviews the reference csv marks ``repo_split`` "val" (facts of the reference copy, not settings).

The IWS code's csv holds out 20% of aclImdb's train reviews (2500 positive, 2500 negative) by a random split whose
seed is not known here; these are those ids, recorded from the shared copy so that rebuilding the csv from
``aclImdb_v1.tar.gz`` reproduces it byte for byte. Each value is a base64 zlib-compressed bitmap over ids 0..12499
(bit ``id % 8`` of byte ``id // 8``), one per label (+1 positive, -1 negative).
"""

import base64
import zlib

_BITMAPS = {
    "1": (
    "eNoVVM1rXFUU/9377kzuTKb1vOekvH4IZ6bTOikRJrGFUBHuvL6WsbQyKbFEcPFio6ighNI/4M7rNL6UUF9CW4Ibp7FKBRepqy4U"
    "JqGVKiJBXLgRUnHRpSvBnTeXuzn33APn/D4OsNVeEriodUfFELgH+XIolWqui57pnESWCN3KOwgm4vn+vaMzkKZpQ/Bghztk6sI8"
    "KO6mQmN4nKqPWKnOOrahY5ghq0LwKEEkl2HP1KQkrYEFUnq6vNAUmowLS2JOGtsNlII74opIJwtZiJFK34VFqMPQSm0w2UyXZoFJ"
    "UF1baMPmVwkJPaWPN6yRZjh/TpI8RjUjpoiGp3oX4I+6Ifru0wdDNoZJsMIKmuEWhIEh0oyhxuoSBprbmzL6T+ulx61Y2RsGoTns"
    "uwYqMIcmZD1H6RoTYPrsCUzg+R+W2hCU9sy+XWkVLN0+PzqWB9iwhUUJ5iZlmaH1QTeo4O9fiPtaU3DjT351ha63jTpZlmayrlOU"
    "xsVbEhE85N0mwLKPSgKcpq9JUt8Wkrmdza7KMdfy1Io2Yp/np+UunkXXt5uiAyjRRWxEwdJR05pTZ9ExalSWkOzlOI66h/PIiOmG"
    "1580IlGDsPGh8ZUGGx2lgPyuPmUfDEUBI1l6Ow9jjoaqwgVxxuxcgyI8qkh6KPa4QCYsUSFnZA74ItklzFTw/peu+btFuV+nNk4c"
    "VWjTLWqscvWGblcywzKZ7tl0XLZI7/OjIl2oixUz/lMhUiWpE/3D9feGCw1oOUI6mQext+k0pSH3DdC5+M18yB7aB5iOy35qdHjE"
    "9st8AqWrSou5qXbtcsA1fEyZBuEFbERjHkuQ8LIp9Mg3UEpe7Zk6zlmlMjRnxP7P+iaL6Uqyg+BnBbqjj8HqMtCq3VTCCcMuIGTd"
    "FtUjsubMoNAijJrJKBiYYoc2VAOZtlVara7lnB7CuJ3BgFBVasuhhajG+MJr3MeG37VDvIhm5V2D6TcOFrYmK844GG9uQZ0vEcK1"
    "sWrWsPXFifV8T0AKsx+F6tzrokNhyy/ywqDlnzfirx9Vecr3MHeJUKBRb8mos82cciOqa/POPtdwyFEzAlBLSGAQHIjka2IW7Pm/"
    "M6BLyIvgGFMZcHKnBSklX4ZNu3p60Rtf7idzCqbhlL0fRSd4ttKhG/GBC0M9IguIYTuxWV8up+r8XXXCrjnnSOsnFsV2Je3hX5wC"
    "vgL2y8jZNmrab2+pWX/mUpiTILEJhp+cHqGUVrEwEM9iw4pYqOKwU/VFPUyJ6WjAKtUt5OxFjsfvuX2Dax3o+Zp4ug79T7qGgBqx"
    "Ww8mDmJn2uh503naHSve6VL9MXeO9AMF4a57jOqbvXW5i4mhUjEVMDiFHvYybFZdmaCDDOmLTqgDBEccYiXHX3wsGRtbGd+1jhhN"
    "DrdXyvYORMak214SPNhmLpvR+zkW7INQVVtMDiszGi3Guqf6x9UnYldyxn5DDfHS6oKCvmU+t4NPq61NhbSjMVBG2zd7T4AnxphL"
    "OYpyeanJUtv8vobNholuZE64VD1YeIgyiygLTJn4bRhc32DVcu3DKDF9QtxzrC8uQtdFvOw8LovVgmAaoK3heBRRxVbb9VLsZuVu"
    "ONTbVozWqX/T7Y5yXToVwIndlbl8+lTVd7KUHDomdquZe+aRLXE5kZWjHvBbX/4PmwQ28g=="
    ),
    "-1": (
    "eNoVVE9sFFUY/723b7dvt1t4Ow5lW9F8u53iFNAsWJNqOLxdtnVaCZmWkIAxZiAbUzmYSjhwfLtsybRBmVY0FT1MSU0a4oF4MHib"
    "Igc0Hnox8WiQKMaD8cbR1+NLvrzv+/3V+mK9IKEp5247Th5AOxIlpoGLPRgKMJts9Q1Q7J/2GHIkDap2SDJZ9lgPJCFAwHdNpvPy"
    "vtLfcvsUiPWCWVbi9JqQGZM8ZFHcwwyG4Ugm4IJJUQR8rzjPSwLpRI477ZUUCzQm8HplMjrAXEaKdeHG5YhvGbuEsZFemyE97NAA"
    "sOKqlMHONLhPHjtMwh/XZhT6mcxAd/FeOY6Xwxg476Y/UIfd0Vq1riapistsdoo8oHKOWhe3n1zw3+KSMSBAy9mJUCwlcgNfmuze"
    "4TpAIp2wEHuG6cIe2A96BTb4/q9iDgV5BZoDTi8XWEKux/JC0DWYI4U0t3SUhVVcPsVHUyknnMiFqHNW53YtvNqKKlCWq3xlaAhq"
    "BVgW1HXZSMMTqA2HrodoFGnUtDdNgPXZvIRElhzk6xHnAjxVT/RIQQr/i0FgKrOHa+Se60Zi7/WVHb5Rg7AiWVrIh3QxT7mu2uZS"
    "aZQLbXk8Lt6yf8OPQbkaUlQeGh6B6JLQw6UlgvZPATU82kFVDAZWhl0/YOPKREDk86DEDITTkC86ItmwKjbWU8apRWpE5btfs0Sl"
    "6pBChivjSUZGyLCaNCB8k6Q3EAp0iGuhuqMaQbfOtbGEqcmrLcLpFrrK3OQS5ohsN/8xQoNpYzkbMmtKcEVmJ9ofH4eYFj673Zdb"
    "J5g7P2M3YUDd7m4/kkxlEx3kX/uX7TJFaWZwvBUdt4pO1nmvh/WPuCb1s7TYNUbfliTOW2cLsXO/5QAG9bp003AQAU8By1DNB+d7"
    "3+PvKaj8ail0jjWW4cu29WJZjiupiWkttc2BkGAsN+yPH5ToneQu1PrqwGcdLAak40SpQpzosIWJ20BrpJysNWXBmgdTEBSLm+E1"
    "Trvc4QdTZWRf45ig4i73Hp6gybWd/b56IO8MNxPQ0ZMryRmFav8nDAkbJK+WRU/BdawqVVdfmtZ8laGor9gc55vAoiDUcXC6GpaU"
    "mbl7gngZ2Rs2vWfxYWQIVMVkxQI1nq99RvoTLO3mWcQ7MfiYLKv8Jkt72Rk8vaWhvGnZc/OTXFubPl4YYZTnerpiFcIvtQ4HF3Mq"
    "lISOXX1gyTZK84b7DAsyVwlpOqnwE5NN8td1iVV0PrQdYUBD9wNLc+HyAr83IxtG/h56mXMYfEB/43r7VNC+tzG7KWIGs4X2C3XH"
    "w4+saA3F9aFNq4rQipjM23CYAei86f8ncy975k+Gy3uyVut76vFKefVzdAW9BFhXz7VVHdJqBdXFcqq3jr1iDogaL4vUa7QChkCJ"
    "v2KuICnf0jnkzHULfaw28hjvVHRlTzLgt0M+mGp7/A/d1QKtQL3L3RV0hKY3Awvs47qp1tS5FqaGTykdNPp8xQbGs6MG18q6tqqf"
    "c9LoEfEd6FdVu2w/JfTdvOA9JdfOg818OtYkBymBI33QNlkd69l8VdPULGZVjbUZtdzNiN0MkFizVpVzSSR05Goc2TJebApshIWz"
    "Bo+FdYHbkty1VeUXRR58iKNNPVWwJJh4UTbN97YmSpWGsAqHDfG06OtgX05TVvofwc4x9Q=="
    ),
}


def val_ids(label: str) -> frozenset[int]:
    """The train ids of reviews with ``label`` ("1" or "-1") that the reference csv marks "val"."""
    bits = zlib.decompress(base64.b64decode(_BITMAPS[label]))
    return frozenset(i for i in range(len(bits) * 8) if bits[i // 8] >> (i % 8) & 1)
