/*
 * float_text — the C face of double-conversion (core/float_text.h). The only
 * C++ in graphfs: it calls the library and nothing else.
 */
#include "float_text.h"

#include <cmath>
#include <cstring>

#include <double-conversion/double-conversion.h>

using double_conversion::DoubleToStringConverter;
using double_conversion::StringToDoubleConverter;

void float_text_digits(double value, enum float_text_mode mode, int precision, char *digits, size_t size,
				  int *count, int *point)
{
	DoubleToStringConverter::DtoaMode dtoa = mode == FLOAT_TEXT_SHORTEST ? DoubleToStringConverter::SHORTEST
						 : mode == FLOAT_TEXT_SHORTEST_SINGLE
							 ? DoubleToStringConverter::SHORTEST_SINGLE
							 : DoubleToStringConverter::PRECISION;
	bool sign = false;
	int length = 0, decimal_point = 0;
	DoubleToStringConverter::DoubleToAscii(value, dtoa, mode == FLOAT_TEXT_PRECISION ? precision : 0, digits,
					       (int)size, &sign, &length, &decimal_point);
	while (length > 1 && digits[length - 1] == '0')
		length--;
	digits[length] = 0;
	*count = length;
	*point = decimal_point;
}

double float_text_read(const char *text, size_t length)
{
	static const StringToDoubleConverter converter(StringToDoubleConverter::NO_FLAGS, 0.0, NAN, nullptr, nullptr);
	int processed = 0;
	return converter.StringToDouble(text, (int)length, &processed);
}
